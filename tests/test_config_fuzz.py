"""The config fuzzer: generated command lines through ``python train.py``'s own entry point.

Hypothesis draws a setup (shapes images, CIFAR-10 images, sequences, a plug-in encoding on shapes) and
one to three overrides
from every config group (``configs/<group>/*.yaml`` and a name no group has) and every option
the composed configs hold (``data.batch_size``, ``eval.resolutions``, ...), each with a value
drawn from valid ones (the option's default), boundaries (0, 1, -1), huge and negative numbers,
NaN and infinities, empty and nested lists, strings in number fields, interpolations and special
characters; and the override forms ``+key=``, ``++key=`` and ``~key``. Each command runs in
process through ``train.py``'s ``main(argv)`` (Hydra's main, the config check of
vitpos/validate.py) with :func:`vitpos.train.train` replaced by a stub: a command that gets past
the config check stops there instead of training.

The property (:func:`check_command`): the command either passes the config check, or exits 2
printing exactly one line ``error: <option>: <what> (<fix>)``; never a traceback, never a fix the
command already follows (:func:`false_fix`), never a file written (the folder it runs in, which
holds ``run.root``, stays empty); and a command that passes holds a number in every option whose
default is a number (:func:`untyped`: text there would fail in training, with a traceback). The
typed options are also fuzzed at the edges of their rules, read from the schema (the rules its fields'
metadata hold, vitpos/config/): refused exactly outside the range the schema states. The
tools' ``key=value`` parser (vitpos/cli/options.py) is fuzzed the same way for
``python -m vitpos.compare``, ``python -m vitpos.extrapolate`` and ``python -m vitpos.benchmark``.

The examples are derandomized (the same ones on every run, so CI is reproducible) and bounded:
the ``train.py`` variants take about a minute and a half on one core, so they run in the slow tier
(``python -m pytest -m slow``; CI runs both tiers), the tools' in the fast one; ``VITPOS_FUZZ_MORE=1``
with ``-m slow`` runs ten times as many commands (about 12 minutes in CI's run, so CI leaves it out).
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from conftest import CONFIGS, compose_train, run_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from omegaconf import OmegaConf

from vitpos.config import OPTIONS as RULES
from vitpos.config import SCHEMAS
from vitpos.config.rules import SEQUENCE, Flag, Given, Int, Number
from vitpos.errors import UserError

# Hypothesis keeps its caches (and, for a failure, a patch) in ./.hypothesis: not in the repository
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "vitpos-hypothesis")

#: the setups a command starts from (the shapes data set is counted before loading: its split rules run)
BASES = {
    "image": ["data=shapes", "model=vit_micro"],
    "cifar": ["data=cifar10", "model=vit_micro"],
    "sequence": ["task=sequence"],
    # a plug-in (the documented example): its options, encoding.module and encoding.name, are drawn too
    "plugin": ["data=shapes", "model=vit_micro", "encoding=plugin",
               f"encoding.module={CONFIGS.parent / 'docs' / 'examples' / 'my_enc.py'}", "encoding.name=scaled_sincos"],
}  # fmt: skip

#: the config groups of train.yaml's defaults list, and the configs of each (a name no group has too)
GROUPS = {
    name: [*sorted(p.stem for p in (CONFIGS / name).glob("*.yaml")), "nosuch", "null"]
    for entry in OmegaConf.to_container(OmegaConf.load(CONFIGS / "train.yaml").defaults)
    if isinstance(entry, dict)
    for name in entry
    if (CONFIGS / name).is_dir()
}


def leaves(node, prefix: str = "") -> dict[str, object]:
    """Every option of a plain config (dotted name -> value); a list is one option."""
    if not isinstance(node, dict):
        return {prefix: node}
    found = {}
    for key, value in node.items():
        found.update(leaves(value, f"{prefix}{key}" if not prefix else f"{prefix}.{key}"))
    return found


def options_of(base: list[str]) -> dict[str, object]:
    """The options ``python train.py BASE`` composes, with their values (``run.root`` left out: the
    fuzzer sets it to its empty folder)."""
    plain = OmegaConf.to_container(compose_train(*base), resolve=False)
    return {k: v for k, v in leaves(plain).items() if k != "run.root"}


OPTIONS = {name: options_of(base) for name, base in BASES.items()}


def typed(value) -> str:
    """A value as it is typed on the command line: 3, 0.5, true, null, [16,[16,32]], 'text'."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(typed(v) for v in value) + "]"
    if isinstance(value, str):
        return value if re.fullmatch(r"[\w.\-]+", value) else repr(value)
    return str(value)


NUMBERS = ["0", "1", "-1", "2", "3", "4", "7", "8", "16", "32", "-5", "1000", "2147483648", "99999999999999999999999"]
FLOATS = ["0.0", "0.5", "-0.5", "1.0", "1e-9", "2.0e-3", "1e100", "1e308", "1e309", "inf", "-inf", "nan"]
WORDS = [
    "abc", "'12'", "''", "null", "true", "false", "none", "auto", "'a b'", "é", "'~foo'", "'a/b'", "..", "'/abs'",
    "'$HOME'", "'${oc.env:VITPOS_NO_SUCH}'", "${oc.env:VITPOS_NO_SUCH}", "${data.nosuch}", "${seed}", "'x\"y'",
    "a,b", "{a:1}", "{}", "'\\\\'", "'%s'", "'\\n'",
]  # fmt: skip
LISTS = [
    "[]", "[[]]", "[0]", "[0,16]", "[-1]", "[16,24,32]", "[abc]", "[1.5]", "[[16,32]]", "[[0,16]]", "[16,[16,32]]",
    "[null]", "[true]", "[99999999999999]", "[32,4096]", "[16,16,16,16]", "[[16,32,8]]", "[{}]",
]  # fmt: skip
#: characters that mean something to a shell, to Hydra's grammar, to YAML or to a path
SPECIAL = "~!@#$%^&*()[]{}<>|\\/'\",;:=?+ \t.`-_aZ09é\u00a0"

values = st.one_of(
    st.sampled_from(NUMBERS + FLOATS + WORDS + LISTS),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(SPECIAL, min_size=0, max_size=6),
)


@st.composite
def commands(draw) -> tuple[str, list[str]]:
    """(setup name, overrides): one to three overrides of a group, an option or a new key."""
    setup = draw(st.sampled_from(sorted(BASES)))
    options = OPTIONS[setup]
    overrides = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["group", "option", "option", "option", "option", "default", "form"]))
        if kind == "group":
            group = draw(st.sampled_from(sorted(GROUPS)))
            overrides.append(f"{group}={draw(st.sampled_from(GROUPS[group]))}")
            continue
        key = draw(st.sampled_from(sorted(options)))
        if kind == "default":  # a valid value: the option's own default
            overrides.append(f"{key}={typed(options[key])}")
        elif kind == "form":  # deleting an option, adding one, forcing one
            section = key.rpartition(".")[0] or "run"
            form = draw(st.sampled_from([f"~{key}", f"+{section}.bogus={{v}}", f"++{key}={{v}}", f"+{key}={{v}}"]))
            overrides.append(form.replace("{v}", draw(values)))
        else:
            overrides.append(f"{key}={draw(values)}")
    return setup, overrides


ERROR_LINE = re.compile(r"error: (?P<option>[^:\s][^:]*): (?P<what>.+) \((?P<fix>.+)\)")  # fix: the last (...)


def false_fix(option: str, fix: str, argv: list[str]) -> str | None:
    """A fix the command already follows: ``e.g. <option>=<value>`` (or ``<option>=<value>`` alone)
    where the command sets ``<option>`` to that same value. None when the fix is not of that form
    or asks for something else."""
    name = re.escape(re.sub(r"\[\d+\]$", "", option))
    wanted = re.findall(rf"(?<![\w.+]){name}=(\S+?)(?=[;,)]?(?:\s|$))", fix)
    given = [a.split("=", 1)[1] for a in argv if "=" in a and re.sub(r"^[+~]+", "", a).split("=", 1)[0] == option]
    for value in wanted:
        if given and given[-1] == value:
            return f"the fix asks for {option}={value}, which the command already sets"
    m = re.search(rf"{name} (<|<=|>|>=) (-?\d+)", fix)  # use data.val_size < 20000
    if m and given:
        try:
            have = int(given[-1])
        except ValueError:
            return None
        limit, op = int(m.group(2)), m.group(1)
        holds = {"<": have < limit, "<=": have <= limit, ">": have > limit, ">=": have >= limit}[op]
        if holds:
            return f"the fix asks for {option} {op} {limit}, which {have} already meets"
    return None


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def untyped(setup: str, cfg) -> str | None:
    """A number option of the setup's configs (its default a number, or a list of numbers) that the
    config check let through holding something else (``model.mlp_ratio=abc``): the run would fail in
    training, with a traceback. Sizes (a side or ``[h, w]``) are checked by their own rule."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    for option, default in OPTIONS[setup].items():
        node = plain
        for key in option.split("."):
            node = node.get(key, ABSENT) if isinstance(node, dict) else ABSENT
        numbers = isinstance(default, list) and default and all(is_number(v) for v in default)
        if node is ABSENT or node is None or not (is_number(default) or numbers):
            continue
        ok = all(is_number(v) for v in node) if numbers and isinstance(node, list) else is_number(node)
        if not ok and not any(part in option for part in ("size", "resolutions")):
            return f"passed the check with {option}={node!r}, not a number"
    return None


ABSENT = object()


def check_command(setup: str, overrides: list[str]) -> str | None:
    """What is wrong with ``python train.py SETUP OVERRIDES`` (None: nothing): the command runs
    in process in an empty folder (``run.root`` inside it), training replaced by a stub."""
    return judge(setup, overrides, *run_train(setup, overrides))


def run_train(setup: str, overrides: list[str]):
    """(what ran, the config training got or None, the files written, a traceback or None)."""
    argv = [*BASES[setup], *overrides]
    with tempfile.TemporaryDirectory() as tmp, mock.patch("vitpos.train.train", return_value={}) as train:
        try:
            ran = run_command("train.py", *argv, f"run.root={Path(tmp) / 'runs'}", cwd=Path(tmp))
        except Exception as err:  # noqa: BLE001 (the property: a traceback is a finding)
            return None, None, [], f"traceback: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        written = sorted(str(p.relative_to(tmp)) for p in Path(tmp).rglob("*"))
    return ran, (train.call_args.args[0] if train.called else None), written, None


def judge(setup: str, overrides: list[str], ran, trained, written: list[str], crash: str | None) -> str | None:
    """The property of :func:`check_command` on one command's outcome."""
    if crash:
        return crash
    text = ran.out + ran.err
    if written:
        return f"wrote {written[:3]}"
    if "Traceback" in text:
        return "printed a traceback"
    if ran.code == 0:
        return untyped(setup, trained) if trained is not None else "exit 0 without passing the config check"
    if ran.code != 2:
        return f"exit {ran.code}: {text.strip()[-200:]}"
    lines = text.strip().splitlines()
    if len(lines) != 1:
        return f"{len(lines)} lines: {text.strip()[:200]}"
    m = ERROR_LINE.fullmatch(lines[0])
    if m is None:
        return f"not 'error: <option>: <what> (<fix>)': {lines[0][:200]}"
    return false_fix(m["option"], m["fix"], [*BASES[setup], *overrides])


FUZZ = settings(
    derandomize=True,  # the same examples on every run: a CI failure reproduces
    database=None,  # nothing written into the repository
    deadline=None,  # a first call imports torch and Lightning
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=False,
)


def fuzz_train(command: tuple[str, list[str]]) -> None:
    problem = check_command(*command)
    assert problem is None, f"python train.py {' '.join([*BASES[command[0]], *command[1]])}: {problem}"


@pytest.mark.slow  # 150 commands: about a minute of one core, half the fast tier's longest file
@settings(FUZZ, max_examples=150)
@given(commands())
def test_train_commands_pass_or_exit_2_with_one_line(command):
    fuzz_train(command)


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("VITPOS_FUZZ_MORE"),
    reason="1,500 fuzzed commands take about 12 minutes (CI runs the 150 above): "
    "VITPOS_FUZZ_MORE=1 python -m pytest -m slow tests/test_config_fuzz.py",
)
@settings(FUZZ, max_examples=1500)
@given(commands())
def test_train_commands_pass_or_exit_2_with_one_line_more(command):
    fuzz_train(command)


# ------------------------------------------------------------------ the schema's edges
def edges(spec: Int | Number | Flag) -> list:
    """Values on both sides of every bound of an option's rule, read from the schema (its field's
    metadata): what the fuzzer takes as the option's accepted range."""
    if isinstance(spec, Flag):
        return [True, False, 0, 1, "yes"]
    if isinstance(spec, Int):
        found = [spec.minimum - 1, spec.minimum, spec.minimum + 1, True]
        found += [spec.maximum, spec.maximum + 1] if spec.maximum is not None else []
    else:
        found = [spec.low - 0.5, spec.low, spec.low + 0.5, float("inf"), True]
        found += [spec.below - 1e-3, spec.below] if spec.below is not None else []
    return [[v] * (spec.length or 1) for v in found] if spec.items else found


#: (setup, option, value): every option of the schema with each of its edges, in a setup whose task uses it
EDGES = [
    ("sequence" if spec.task == SEQUENCE else "image", option, value)
    for option, spec in RULES.items()
    if not isinstance(spec, Given)  # checked elsewhere: by the size, path and Lightning tests
    for value in edges(spec)
]


def refused_by_schema(option: str, value) -> bool:
    """Whether the schema's own rule refuses ``option=value``."""
    spec = RULES[option]
    return any(spec.problem(v) for v in (value if spec.items else [value]))


def check_edge(setup: str, option: str, value) -> str | None:
    """The command ``SETUP ++OPTION=VALUE`` obeys the schema: refused, naming the option, where
    the schema's rule refuses the value; else not refused by that rule (another rule may still
    refuse it: ``model.dim=2`` with four heads)."""
    overrides = [f"++{option}={typed(value)}"]
    outcome = run_train(setup, overrides)
    problem = judge(setup, overrides, *outcome)
    if problem:
        return problem
    ran = outcome[0]
    said = (ran.out + ran.err).strip()
    rule = f"{option}: must be {RULES[option].rule()}"
    named = re.match(rf"error: {re.escape(option)}(\[\d+\])?: ", said) is not None
    if refused_by_schema(option, value):
        return None if ran.code == 2 and named else f"the schema refuses it, the command: {said[:200] or 'exit 0'}"
    if ran.code == 2 and said.startswith(f"error: {rule}"):
        return f"the schema accepts it, the command refused it by that same rule: {said[:200]}"
    return None


@pytest.mark.slow  # 40 commands at the edges of the schema's rules: about 20 s
@settings(FUZZ, max_examples=40)
@given(st.sampled_from(EDGES))
def test_every_option_is_refused_exactly_outside_its_schema_range(edge):
    problem = check_edge(*edge)
    assert problem is None, f"{edge[1]}={typed(edge[2])} ({edge[0]}): {problem}"


def test_one_bound_in_the_schema_moves_the_check_the_help_and_the_fuzzer(monkeypatch):
    """Each rule has one owner: a bound changed in the schema alone (the rule a field's metadata holds)
    changes what the config check refuses, what ``python train.py --help`` says and the range the fuzzer
    tests, together. ``data.batch_size`` is one rule, attached to the field of every data set."""
    held = [f.metadata["rule"] for (group, _), s in SCHEMAS.items() if group == "data" for f in
            dataclasses.fields(s) if f.name == "batch_size"]  # fmt: skip
    spec = held[0]
    assert len(held) == 5 and all(rule is spec for rule in held)
    monkeypatch.setattr(spec, "minimum", 8)
    assert check_edge("image", "data.batch_size", 7) is None and check_edge("image", "data.batch_size", 8) is None
    refused, _, _, _ = run_train("image", ["data.batch_size=7"])
    assert refused.code == 2 and refused.err.startswith("error: data.batch_size: must be an integer >= 8"), refused.err
    accepted, trained, _, _ = run_train("image", ["data.batch_size=8"])
    assert accepted.code == 0 and trained.data.batch_size == 8, accepted.err
    monkeypatch.setattr("sys.argv", ["train.py", "--help"])
    assert re.search(r"data\.batch_size +an integer >= 8: ", help_text())
    assert {7, 8} <= set(edges(spec)) and 0 not in edges(spec)


def help_text() -> str:
    """What ``python train.py --help`` prints, run in this process."""
    ran = run_command("train.py", "--help")
    assert ran.code == 0, ran.err
    return ran.out


# ------------------------------------------------------------------ the tools' key=value options
def tool_words(schema: type) -> st.SearchStrategy[list[str]]:
    """Command lines of a tool: its options and unknown ones, with any value; bare words, flags."""
    keys = [f.name for f in dataclasses.fields(schema)] + ["bogus", "data.eval_batch_size", "out.x", ""]
    word = st.one_of(
        st.builds(lambda k, v: f"{k}={v}", st.sampled_from(keys), values),
        st.sampled_from(["last.ckpt", "--out", "--runs", "-x", "=", "==", "runs==x", "key"]),
        st.text(SPECIAL + "\n", max_size=8),  # a shell word may hold a newline
    )
    return st.lists(word, min_size=0, max_size=4)


def parse_problem(schema: type, argv: list[str]) -> str | None:
    """What is wrong with parsing ``argv`` onto ``schema`` (None: parsed, or refused with a
    :class:`UserError` that names the option and gives a fix)."""
    from vitpos.cli.options import parse_options

    try:
        parse_options(argv, schema, prog="tool")
    except UserError as err:
        if not err.option or not err.fix or "\n" in str(err):
            return f"a refusal without an option or a fix, or on more lines: {err}"
    except SystemExit as stop:  # --help exits 0; nothing else may exit
        return None if stop.code == 0 and any(w in ("-h", "--help") for w in argv) else f"exit {stop.code}"
    except Exception as err:  # noqa: BLE001 (the property: anything else is a traceback)
        return f"traceback: {type(err).__name__}: {err}"
    return None


def tool_schemas():
    from vitpos.benchmark import BenchmarkOptions
    from vitpos.compare.summary import CompareOptions
    from vitpos.extrapolate.checkpoints import ExtrapolateOptions

    return {
        "vitpos.compare": CompareOptions,
        "vitpos.extrapolate": ExtrapolateOptions,
        "vitpos.benchmark": BenchmarkOptions,
    }


@settings(FUZZ, max_examples=1000)
@given(tool=st.sampled_from(["vitpos.compare", "vitpos.extrapolate", "vitpos.benchmark"]), data=st.data())
def test_tool_options_parse_or_refuse_with_a_fix(tool, data):
    schema = tool_schemas()[tool]
    argv = data.draw(tool_words(schema))
    problem = parse_problem(schema, argv)
    assert problem is None, f"python -m {tool} {' '.join(argv)}: {problem}"


def tool_command(tool: str, argv: list[str]) -> str | None:
    """What is wrong with ``python -m TOOL ARGV`` run in process in an empty folder, where its
    input (``runs=``, ``ckpt=``, the benchmark's ``results=``) names a file that does not exist: it
    must exit 2 with one ``error:`` line and write nothing (the benchmark: before it plans or trains)."""
    main = {"vitpos.compare": "runs", "vitpos.extrapolate": "ckpt", "vitpos.benchmark": "results"}[tool]
    with tempfile.TemporaryDirectory() as tmp:
        missing = f"{main}={Path(tmp) / 'missing'}"
        try:
            ran = run_command(tool, missing, *argv, cwd=Path(tmp))
        except Exception as err:  # noqa: BLE001
            return f"traceback: {type(err).__name__}: {err}"
        written = sorted(str(p.relative_to(tmp)) for p in Path(tmp).rglob("*"))
    lines = (ran.out + ran.err).strip().splitlines()
    if written:
        return f"wrote {written[:3]}"
    if ran.code != 2 or len(lines) != 1 or not lines[0].startswith("error: "):
        return f"exit {ran.code}: {(ran.out + ran.err).strip()[:300]}"
    return None


@settings(FUZZ, max_examples=150)
@given(tool=st.sampled_from(["vitpos.compare", "vitpos.extrapolate", "vitpos.benchmark"]), data=st.data())
def test_tools_on_bad_input_exit_2_with_one_line(tool, data):
    schema = tool_schemas()[tool]
    argv = [w for w in data.draw(tool_words(schema)) if w not in ("-h", "--help")]
    problem = tool_command(tool, argv)
    assert problem is None, f"python -m {tool} {' '.join(argv)}: {problem}"
