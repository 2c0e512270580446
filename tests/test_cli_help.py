"""Help pages, the one key=value convention of every tool and the console of a real run.

The help pages and the errors run each command's ``main(argv)`` in process (the text is the point);
the console test runs a real ``python train.py``: what a terminal shows (the warnings Python prints
once per process, Lightning's own log lines, the progress bar) is the point there.
"""

import dataclasses
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from conftest import ROOT, run_command

from vitpos.cli.options import expand_paths, help_text, option, parse_options
from vitpos.config.rules import Int, Number
from vitpos.encodings import list_encodings
from vitpos.errors import UserError


def test_train_help_lists_encodings_by_kind(tmp_path):
    ran = run_command("train.py", "--help", cwd=tmp_path)
    assert ran.code == 0, ran.err
    text = ran.out
    images, sequences = text.split("images (2D grids):")[1].split("sequences (1D):")
    listed = lambda part: {m for m in re.findall(r"^    (\w+) ", part, re.M)}  # noqa: E731
    assert listed(images) == set(list_encodings(2))
    sequences = sequences.split("Checked options")[0]
    also = sequences.split("also, as above:")[1]  # the ones listed for images too, by name
    assert listed(sequences) | set(re.findall(r"\w+", also)) == set(list_encodings(1))
    for section in ("Quick start: two encodings, one table", "Train on CIFAR-10", "Add an encoding"):
        assert f'"{section}"' in text and f"## {section}" in (ROOT / "README.md").read_text()
    assert "docs/running.md" in text and (ROOT / "docs" / "running.md").is_file()
    assert list(tmp_path.iterdir()) == []  # --help writes nothing (no outputs/)


#: the keys ``python train.py --help`` lists under "Common keys", the ones a newcomer needs first
COMMON_KEYS = ("encoding", "model", "data", "trainer.max_epochs", "trainer.precision", "seed", "eval.resolutions",
               "eval.test_subset", "run.group", "run.root")  # fmt: skip


def test_train_help_sweeps_offline_reads_cleanly_and_lists_the_common_keys(tmp_path):
    """Every ``-m`` example in ``python train.py --help`` runs on the generated data (a sweep copied
    from it never starts full CIFAR-10 runs), no word is doubled (the encoding list's
    ``parabolas`` option once read "parabolas concave parabolas"), and the ten common keys are
    listed with a meaning each, every one a key of the composed config."""
    from conftest import compose_train
    from omegaconf import OmegaConf

    ran = run_command("train.py", "--help", cwd=tmp_path)
    assert ran.code == 0, ran.err
    text = ran.out
    sweeps = [line for line in text.splitlines() if re.search(r"python train\.py\b.*\s-m\s", line)]
    assert sweeps and all(re.search(r"\sdata=shapes\b", line) for line in sweeps), sweeps
    assert "parabolas concave parabolas" not in text
    assert not re.search(r"\b(\w+) \1\b", text), re.search(r".{30}\b(\w+) \1\b.{30}", text)
    common = text.split("Common keys")[1].split("\n\n")[0].splitlines()[1:]
    listed = {m.group(1): m.group(2) for m in (re.match(r" +([\w.]+)=\S+ +(\S.*)$", line) for line in common) if m}
    assert tuple(listed) == COMMON_KEYS, common
    cfg, missing = compose_train(), object()
    for key in listed:
        assert OmegaConf.select(cfg, key, default=missing) is not missing, f"--help lists {key}, not a config key"


def test_train_help_reads_in_a_terminal(tmp_path):
    """Every line within 100 columns; the checked options under their config group; the options
    that keep the run folder marked, the mark explained once."""
    from vitpos.cli.train_help import SAME_FOLDER, WIDTH
    from vitpos.config import OPTIONS

    ran = run_command("train.py", "--help", cwd=tmp_path)
    assert ran.code == 0, ran.err
    wide = [line for line in ran.out.splitlines() if len(line) > WIDTH]
    assert WIDTH == 100 and not wide, "\n".join(wide)
    assert ran.out.count("same run folder") == 1
    checked = ran.out.split("Checked options")[1].split("hydra.launcher")[0]
    heading = None
    for line in checked.splitlines():
        if m := re.match(r"^  (\w+):$", line):
            heading = m.group(1)
        elif m := re.match(r"^    ([\w.]+)(\*?) ", line):
            option, mark = m.groups()
            assert option in OPTIONS and option.split(".")[0] == heading, line
            assert (mark == SAME_FOLDER) == (not OPTIONS[option].defines), line
    listed = set(re.findall(r"^    ([\w.]+)\*? ", checked, re.M))
    assert listed == set(OPTIONS)


TOOLS = ["vitpos.compare", "vitpos.extrapolate", "vitpos.viz", "vitpos.export", "bench.run"]


@pytest.mark.parametrize("tool", TOOLS)
def test_tool_help_follows_one_layout(tool, tmp_path):
    """Every tool's --help: a usage line, a plain-text description, then one line per key=value
    option with its default; no RST markup, no argparse --options, only current run paths."""
    ran = run_command(tool, "--help", cwd=tmp_path)
    assert ran.code == 0, ran.err
    text = ran.out
    assert text.startswith(f"usage: python -m {tool} ") and "[key=value ...]" in text.splitlines()[0], text
    options = text.split("\nOptions (key=value, as for train.py; lists as [a,b]):\n")[1].splitlines()
    assert options[-1].split() == ["-h,", "--help", "show", "this", "help", "and", "exit"]
    rows = re.split(r"\n(?=  \S)", "\n".join(options[:-1]))  # a long key=METAVAR puts its help on the next line
    assert rows and all(re.match(r"  [\w.<>]+=\S", row) for row in rows), options
    assert all(re.search(r"\((default: .+|required)\)$", row) for row in rows), rows
    assert "``" not in text and ":class:" not in text and ":func:" not in text
    assert not re.search(r"(?<![\w-])--(?!help)\w", text), "an argparse-style option in the help"
    for path in re.findall(r"runs/[\w<>*./-]+/seed[\w<>]+", text):  # runs/<group>/<model>/<label>-<hash>/seed<k>
        assert re.fullmatch(r"runs/[^/]+/[^/]+/[^/]+-[^/]+/seed[^/]+", path), path
    assert list(tmp_path.iterdir()) == []  # --help writes nothing


@pytest.mark.parametrize("tool", TOOLS)
def test_the_same_bad_override_gives_the_same_error_everywhere(tool, tmp_path):
    ran = run_command(tool, "nosuch=1", cwd=tmp_path)
    assert ran.code == 2, ran.out + ran.err
    assert "Traceback" not in ran.out + ran.err
    (line,) = ran.err.splitlines()
    assert re.fullmatch(r"error: nosuch: unknown option \(valid: \w+(, [\w.<>]+)+\)", line), line
    assert list(tmp_path.iterdir()) == []


def test_every_tool_suggests_the_close_key():
    from bench.run import main as bench
    from vitpos.compare import main as compare
    from vitpos.export.cli import main as export
    from vitpos.extrapolate.checkpoints import main as extrapolate
    from vitpos.viz.__main__ import main as viz

    for main, typo, close in [(compare, "ot=x", "out"), (extrapolate, "resolution=[32]", "resolutions"),
                              (viz, "n_image=2", "n_images"), (export, "formt=onnx", "format"),
                              (bench, "quik=true", "quick")]:  # fmt: skip
        with pytest.raises(UserError, match=f"unknown option \\(did you mean {close}\\? valid: "):
            main([typo])


# ------------------------------------------------------------ the shared parser
@dataclasses.dataclass
class Opts:
    """A tool's options."""

    ckpt: list[str] = option([], "checkpoints", metavar="PATH", repeat=True, required=True)
    sizes: list[int] | None = option(None, "sizes", example="[16,32]")
    n: int = option(4, "a count")
    rate: float = option(0.5, "a rate")
    fast: bool = option(False, "a flag")
    out: str = option("out", "a folder", metavar="DIR")
    pool: str = option("gap", "pooling", choices=["gap", "cls"])
    data: dict[str, typing.Any] = option({}, "data overrides")


def parse(*words):
    return parse_options(list(words), Opts, prog="python -m tool")


def test_parser_values_lists_and_repeats():
    opts = parse("ckpt=a", "ckpt=[b,c]", "sizes=[16,24]", "n=3", "rate=1e-3", "fast=true", "out=3",
                 "data.root=x", "data.eval_batch_size=64")  # fmt: skip
    assert opts.ckpt == ["a", "b", "c"] and opts.sizes == [16, 24] and opts.n == 3 and opts.rate == 0.001
    assert opts.fast is True and opts.out == "3" and opts.data == {"root": "x", "eval_batch_size": 64}
    assert parse("ckpt=a", "n=1", "n=2").n == 2  # as in Hydra: the last value wins (ckpt= adds up: repeatable)
    assert parse("ckpt=runs/*/seed0/last.ckpt", "sizes=32").ckpt == ["runs/*/seed0/last.ckpt"]  # taken as typed
    assert parse("ckpt=x", "sizes=32").sizes == [32]  # one value for a list


@dataclasses.dataclass
class Ruled:
    """A tool's options with a rule of the config schema's kinds, declared by the same field helper."""

    seeds: int | None = option(None, rule=Int(2, null=True, help="seeds per encoding"))
    rate: float = option(0.5, "a rate", rule=Number(0.5, below=1))


def test_a_tool_option_with_a_rule_is_checked_as_the_config_check_does():
    assert parse_options(["seeds=3", "rate=0"], Ruled, prog="tool").seeds == 3
    with pytest.raises(UserError, match=r"^seeds: must be an integer >= 1 \(or null\), got 0 \(e.g. seeds=2\)$"):
        parse_options(["seeds=0"], Ruled, prog="tool")
    with pytest.raises(UserError, match=r"^rate: must be in \[0, 1\), got 1.5"):
        parse_options(["rate=1.5"], Ruled, prog="tool")
    assert "seeds per encoding" in help_text(Ruled, "tool") and "a rate" in help_text(Ruled, "tool")


@pytest.mark.parametrize("text", ["${x}", "\\${", "a\\\\${b}", "${", "\\$", "$${x}"])
def test_parser_takes_text_with_dollar_braces_as_typed(text):
    """OmegaConf reads ``${...}`` as an interpolation and ``\\${`` as an escaped one: a tool takes text as typed."""
    opts = parse(f"ckpt={text}", f"out={text}", f"data.root={text}")
    assert opts.ckpt == [text] and opts.out == text and opts.data == {"root": text}


@pytest.mark.parametrize(
    "words, message",
    [
        (["ckpt=a", "nn=3"], "nn: unknown option (did you mean n? valid: ckpt, sizes, n, rate, fast, out, pool, "
                             "data.<key>)"),
        (["ckpt=a", "n=many"], "n: expected an integer, got 'many' (e.g. n=4)"),
        (["ckpt=a", "sizes=[16,x]"], "sizes: expected a list of integers, got '[16,x]' (e.g. sizes=[16,32])"),
        (["ckpt=a", "fast=maybe"], "fast: expected true or false, got 'maybe' (e.g. fast=true)"),
        (["ckpt=a", "rate=fast"], "rate: expected a number, got 'fast' (e.g. rate=0.5)"),
        (["ckpt=a", "pool=avg"], "pool: unknown avg (valid: gap, cls)"),
        (["ckpt=a", "data=1"], "data: expected data.<key>=value"),
        (["ckpt=a", "out.x=1"], "out.x: unknown option"),
        (["last.ckpt"], "last.ckpt: expected key=value (did you mean ckpt=last.ckpt?"),
        (["ckpt=a", "--fast"], "--fast: expected key=value (write fast=true"),
        (["n=3"], "ckpt: required (give ckpt=PATH"),
    ],
)  # fmt: skip
def test_parser_errors_name_the_option_and_the_fix(words, message):
    with pytest.raises(UserError) as err:
        parse(*words)
    assert str(err.value).startswith(message), str(err.value)


def test_parser_help(capsys):
    with pytest.raises(SystemExit) as stop:
        parse("n=oops", "--help")  # --help wins over a bad value
    assert stop.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: python -m tool ckpt=PATH [key=value ...]\n\nA tool's options.\n")
    assert "  ckpt=PATH" in text and "checkpoints; repeatable (required)" in text
    assert "  sizes=[INT,...]" in text and "  fast=true|false" in text and "(default: false)" in text
    assert "  pool=gap|cls" in text and "  data.<key>=VALUE" in text


def test_expand_paths(tmp_path):
    for name in ("rope_2d-abc123", "sincos_2d-def456", "sincos_2d-0a1b2c"):
        (tmp_path / name / "seed0").mkdir(parents=True)
        (tmp_path / name / "seed0" / "last.ckpt").write_text("x")
    found = expand_paths("ckpt", [f"{tmp_path}/sincos_2d-*/seed0/last.ckpt", str(tmp_path / "plain")])
    assert found == [tmp_path / "sincos_2d-0a1b2c/seed0/last.ckpt", tmp_path / "sincos_2d-def456/seed0/last.ckpt",
                     tmp_path / "plain"]  # fmt: skip
    assert expand_paths("ckpt", [f"{tmp_path}/**/last.ckpt"])[0].name == "last.ckpt"
    with pytest.raises(UserError, match=r"ckpt=.*/alibi-\*/seed0: no file or folder matches this pattern"):
        expand_paths("ckpt", [f"{tmp_path}/alibi-*/seed0"])


@pytest.mark.slow
def test_quiet_console_and_next_commands(tmp_path):
    """Fewer than 10 lines before the first epoch line (output to a pipe: no bar, a line per epoch,
    named by the run and counted from 1), no Hydra outputs/ folder, the commands to look next at the end;
    the same command again (in process) finds the same folder. Without a GPU (hidden here), one
    line says so in place of Lightning's device lines and torch's CUDA_HOME note (which
    torch.compile's import of cpp_extension prints when CUDA_HOME names a folder)."""
    args = ["data=shapes", "model=vit_micro", "trainer.max_epochs=1", "data.num_train=256", "data.val_size=64"]
    args += ["data.num_test=64", "eval.resolutions=[32]", "model.compile=true", f"run.root={tmp_path / 'runs'}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}  # stderr and stdout in the order printed
    env |= {"CUDA_VISIBLE_DEVICES": "", "CUDA_HOME": str(tmp_path)}  # no GPU; a CUDA_HOME without a CUDA runtime
    proc = subprocess.run([sys.executable, str(ROOT / "train.py"), *args], cwd=tmp_path, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stdout
    for noise in ("No CUDA runtime", "TPU available", "GPU available: False", "estimate number of stepping"):
        assert noise not in proc.stdout, proc.stdout
    assert len(re.findall(r"^no GPU: training on \d+ CPU threads?, \S+$", proc.stdout, re.M)) == 1, proc.stdout
    lines = proc.stdout.splitlines()
    first_bar = next(i for i, line in enumerate(lines) if line.startswith("sincos_2d/seed0: epoch 1/1  "))
    assert first_bar < 10, "\n".join(lines[:first_bar])
    head = "\n".join(lines[: first_bar + 2])
    assert "v_num" not in head and "sincos_2d/seed0" in head and "litlogger" not in head and "LeafSpec" not in head
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # no outputs/
    folder = re.search(r"run folder: (\S+)", proc.stdout).group(1)
    for command in ("tensorboard --logdir", "vitpos.compare runs=", "vitpos.extrapolate ckpt=", "vitpos.viz ckpt="):
        assert command in proc.stdout
    again = run_command("train.py", *args, cwd=tmp_path)
    assert again.code == 0 and f"run folder: {folder}" in again.err and "nothing trained" in again.out, again


# ------------------------------------------------------------ the console of a run without a GPU
def _shown(name: str, message: str) -> bool:
    """Whether the logger ``name`` lets ``message`` through its filters."""
    import logging

    return bool(logging.getLogger(name).filter(logging.LogRecord(name, logging.INFO, __file__, 0, message, None, None)))


def test_without_a_gpu_one_line_replaces_the_device_lines_and_real_warnings_stay(monkeypatch):
    import logging

    from vitpos.cli import console

    for name in (*console.RANK_ZERO, "torch.utils.cpp_extension"):  # this process's filters come back afterwards
        # without the no-GPU filters an earlier run in this process may have added: the test starts from none
        kept = [f for f in logging.getLogger(name).filters if not isinstance(f, console.DropLines)]
        monkeypatch.setattr(logging.getLogger(name), "filters", kept)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setattr(console, "has_gpu", lambda: True)
    assert console.device_line("bf16-mixed", 2) is None  # a GPU: Lightning's own lines name it, none dropped
    assert _shown(console.RANK_ZERO[0], "GPU available: False, used: False")
    monkeypatch.setattr(console, "has_gpu", lambda: False)
    assert console.device_line("bf16-mixed", 2) == "no GPU: training on 2 CPU threads, bf16-mixed"
    assert console.device_line("32-true", 1) == "no GPU: training on 1 CPU thread, 32-true"
    console.quiet_console()
    for name in console.RANK_ZERO:
        for line in ("GPU available: False, used: False", "TPU available: False, using: 0 TPU cores",
                     "HPU available: False, using: 0 HPUs", "Using bfloat16 Automatic Mixed Precision (AMP)",
                     "Loading `train_dataloader` to estimate number of stepping batches."):  # fmt: skip
            assert not _shown(name, line), (name, line)
        for line in ("The number of training batches (2) is smaller than the logging interval",
                     "`Trainer.fit` stopped: `max_epochs=1` reached.", "GPU available but not used."):  # fmt: skip
            assert _shown(name, line), (name, line)
    assert not _shown("torch.utils.cpp_extension", "No CUDA runtime is found, using CUDA_HOME='/usr/local'")
    assert _shown("torch.utils.cpp_extension", "Error building extension 'fused'")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert console.device_line("bf16-mixed", 2) is None  # a run's second process: the first one said it


def test_the_bar_counts_epochs_from_one_as_every_message_does(monkeypatch):
    """Lightning's bar says ``Epoch 0/2`` in the first of 3 epochs; ours says ``Epoch 1/3``, as the
    epoch lines and the interruption line do (Rich's bar, and tqdm's where Rich is missing)."""
    import importlib.util
    from importlib.util import find_spec
    from types import SimpleNamespace

    from lightning.pytorch.callbacks.progress import rich_progress

    from vitpos.callbacks import LastCheckpoint
    from vitpos.cli.console import epoch_name, progress_bar

    assert (epoch_name(0, 3), epoch_name(2, 3), epoch_name(4, -1)) == ("Epoch 1/3", "Epoch 3/3", "Epoch 5")
    assert LastCheckpoint(Path("/nonexistent/last.ckpt")).interrupted_message(0).startswith(
        "interrupted during epoch 1;")  # fmt: skip
    trainer = SimpleNamespace(max_epochs=3, current_epoch=0, num_training_batches=5)
    if find_spec("rich"):  # the bar Lightning made, renamed after its own hook
        bar = progress_bar("sincos_2d/seed0")
        bar._trainer, bar.progress = trainer, rich_progress.CustomProgress(disable=True)
        bar.train_progress_bar_id = bar.progress.add_task("Epoch 0/2")
        bar.on_train_epoch_start(trainer, None)
        assert bar.train_progress_bar.description.strip() == "Epoch 1/3"
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None)  # no Rich: tqdm's bar
    bar = progress_bar("sincos_2d/seed0")
    bar._trainer = trainer
    said = []
    bar._train_progress_bar = SimpleNamespace(reset=lambda: None, set_description=lambda text, **_: said.append(text))
    bar.on_train_epoch_start(trainer, None)
    assert said[-1] == "Epoch 1/3", said
