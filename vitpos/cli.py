"""The command line, in and out: what every entry point shares.

In: one ``key=value`` convention for ``train.py`` (Hydra), every
``python -m vitpos.*`` tool and ``bench``. A tool declares its options as a
dataclass whose fields are the options (name, type, default, one line of help
each, :func:`option`); :func:`parse_options` parses the command line onto it
with OmegaConf (the structured config does the type checks) and prints the
tool's ``--help`` from it; :func:`expand_paths` expands glob patterns in path
options (bash does not glob inside ``key=value`` words). Hydra's composition
errors become one line (:func:`override_error`). Out: :func:`run_main`, which
prints a user error (:class:`vitpos.errors.InputError`) as one line ``error:
...`` with exit code 2 instead of a traceback, and a quiet training console
(:func:`quiet_console`, :func:`progress_bar`, :func:`summary_line`): one line
per message, one model summary line, a progress bar named after the run.

Lightning logs through its own ``lightning.*`` loggers, each with one handler
when the root logger has none; ``configs/train.yaml`` therefore turns Hydra's
job and hydra logging off (``none``) so nothing prints twice. The warnings
silenced here are known and harmless for this project; each filter names the
message it drops.
"""

from __future__ import annotations

import dataclasses
import difflib
import glob
import inspect
import logging
import os
import re
import sys
import typing
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import MISSING, OmegaConf, ValidationError

from vitpos.errors import InputError, UserError

HELP_WORDS = ("-h", "--help")
GLOB = re.compile(r"[*?[]")


def option(default: Any = MISSING, help: str = "", *, metavar: str | None = None, **meta) -> Any:  # noqa: A002
    """A dataclass field that is a command-line option: its default and one line of ``help``.

    ``metavar``: what the usage shows after ``key=`` (default: from the type).
    ``meta``: ``required=True`` (implied by no default), ``repeat=True``
    (``key=a key=b`` collects ``[a, b]``), ``prefix=True`` (a dict field taking any
    ``key.<name>=value``), ``words=True`` (a list field also filled by bare leading
    words, like a subcommand), ``choices=[...]`` (the allowed values or list items),
    ``default_text`` (the default as --help shows it), ``example`` (a value shown in
    type errors)."""
    meta = {"help": help, "metavar": metavar, **meta}
    if default is MISSING:
        meta["required"] = True
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


class _Option:
    """What the parser needs to know about one field: its kind and metadata."""

    def __init__(self, f: dataclasses.Field, hint):
        self.name, self.meta = f.name, dict(f.metadata)
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        self.optional = type(None) in typing.get_args(hint)
        base = args[0] if self.optional and len(args) == 1 else hint
        origin = typing.get_origin(base)
        self.is_list, self.is_dict = origin is list, origin is dict or base is dict
        self.item = (typing.get_args(base) or (Any,))[0] if self.is_list else base
        self.raw = self.item is str  # paths and names: taken as typed, never parsed as YAML
        self.default = f.default if f.default is not dataclasses.MISSING else f.default_factory()

    @property
    def label(self) -> str:
        return f"{self.name}.<key>" if self.is_dict else self.name

    def metavar(self) -> str:
        if self.meta.get("metavar"):
            return self.meta["metavar"]
        names = {int: "INT", float: "FLOAT", bool: "true|false", str: "TEXT"}
        if self.meta.get("choices"):
            item = "|".join(map(str, self.meta["choices"]))
        else:
            item = names.get(self.item, "VALUE")
        return f"[{item},...]" if self.is_list else item

    def example(self) -> str:
        """A value to show in an error: the declared example, else the default, else one made from the type."""
        if "example" in self.meta:
            return str(self.meta["example"])
        if self.item is bool and not self.is_list:
            return "true"
        if self.default not in (None, MISSING, [], {}):
            return _show(self.default)
        if self.meta.get("metavar"):
            return self.meta["metavar"]
        item = {int: "4", float: "0.5"}.get(self.item, "VALUE")
        return f"[{item}]" if self.is_list else item

    def describe(self) -> str:
        names = {int: "an integer", float: "a number", bool: "true or false", str: "text"}
        if self.is_list:
            return {int: "a list of integers", float: "a list of numbers"}.get(self.item, "a list")
        return names.get(self.item, "a value")


def _show(value) -> str:
    """A value as it is typed on the command line: [16,24], true, none."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_show(v) for v in value) + "]"
    return "none" if value is None else str(value)


def _options(schema: type) -> dict[str, _Option]:
    hints = typing.get_type_hints(schema)
    return {f.name: _Option(f, hints[f.name]) for f in dataclasses.fields(schema)}


def help_text(schema: type, prog: str, usage: str | None = None) -> str:
    """``usage: <prog> ...``, the schema's docstring, then one line per option with its default."""
    opts = _options(schema)
    if usage is None:
        words = [o for o in opts.values() if o.meta.get("words")]
        lead = [f"[{o.name.upper().rstrip('S')} ...]" for o in words]
        must = [f"{o.name}={o.metavar()}" for o in opts.values() if o.meta.get("required")]
        usage = " ".join([*lead, *must, "[key=value ...]"])
    rows = []
    for o in opts.values():
        default = o.meta.get("default_text") or _show(o.default)
        extra = "; repeatable" if o.meta.get("repeat") else ""
        tail = "(required)" if o.meta.get("required") else f"(default: {default})"
        rows.append((f"{o.label}={o.metavar()}", f"{o.meta['help']}{extra} {tail}"))
    rows.append(("-h, --help", "show this help and exit"))
    width = min(max(len(r[0]) for r in rows) + 2, 30)
    lines = [f"usage: {prog} {usage}", "", inspect.cleandoc(schema.__doc__ or ""), ""]
    lines.append("Options (key=value, as for train.py; lists as [a,b]):")
    for left, right in rows:
        lines.append(f"  {left:<{width}}{right}" if len(left) < width else f"  {left}\n  {'':<{width}}{right}")
    return "\n".join(lines)


def _yaml(text: str):
    """A value parsed as OmegaConf parses ``key=value`` (YAML: 3, 0.5, true, [16,24], null); text it cannot parse
    stays text."""
    try:
        return OmegaConf.to_container(OmegaConf.from_dotlist([f"value={text}"]))["value"]
    except Exception:  # noqa: BLE001 (a YAML syntax error: then it is plain text)
        return text


def _value(o: _Option, text: str):
    if o.raw and o.is_list:
        if text.startswith("[") and text.endswith("]"):
            return [t.strip() for t in text[1:-1].split(",") if t.strip()]
        return [text]
    if o.raw:
        return None if o.optional and text in ("null", "none", "None") else text
    value = _yaml(text)
    return [value] if o.is_list and value is not None and not isinstance(value, list) else value


def _bare_word(word: str, opts: dict[str, _Option]) -> UserError:
    """A word without ``=``: say how it is written as ``key=value``."""
    valid = ", ".join(o.label for o in opts.values())
    if word.startswith("-"):  # an argparse habit: --out DIR
        name = word.lstrip("-").replace("-", "_")
        fix = f"write {name}={opts[name].example()}" if name in opts else f"valid keys: {valid}"
        return UserError(word, "expected key=value", f"{fix}; --help for the usage")
    words = next((o for o in opts.values() if o.meta.get("words")), None)
    if words is not None:  # a misspelt subcommand
        choices = words.meta.get("choices") or []
        close = difflib.get_close_matches(word, choices, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        return UserError(word, f"unknown {words.name.rstrip('s')}", f"{hint}valid: {', '.join(choices)}")
    first = next(iter(opts.values()))  # the main option comes first: runs=, ckpt=
    return UserError(word, "expected key=value", f"did you mean {first.name}={word}? valid keys: {valid}; "
                     "--help for the usage")  # fmt: skip


def _check_choices(o: _Option, key: str, value) -> None:
    choices = o.meta.get("choices")
    for item in (value if isinstance(value, list) else [value]) if choices else []:
        if item not in choices:
            close = difflib.get_close_matches(str(item), list(map(str, choices)), n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise UserError(key, f"unknown {_show(item)}", f"{hint}valid: {', '.join(map(str, choices))}")


def parse_options(argv: list[str] | None, schema: type, prog: str, usage: str | None = None):
    """``key=value`` words -> an instance of the dataclass ``schema`` (see :func:`option`).

    Values are parsed as OmegaConf parses them (``3``, ``0.5``, ``true``, ``[16,24]``,
    ``null``), except text options (paths, names), which are taken as typed; the
    structured config built from ``schema`` checks each value's type. ``-h``/``--help``
    prints :func:`help_text` and exits 0. A key given twice keeps the last value, as in
    Hydra, unless it is repeatable (then the values add up). An unknown key, a value of
    the wrong type or a missing required option raises :class:`UserError` naming the
    option, with the valid keys or an example."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(word in HELP_WORDS for word in argv):
        print(help_text(schema, prog, usage))
        raise SystemExit(0)
    opts = _options(schema)
    cfg = OmegaConf.structured(schema)
    given: set[str] = set()
    words = next((o for o in opts.values() if o.meta.get("words")), None)
    for word in argv:
        key, sep, text = word.partition("=")
        if not sep and words is not None and word in (words.meta.get("choices") or [word]):
            cfg[words.name] = [*cfg[words.name], word]  # a bare word: a subcommand (bench's parts)
            continue
        if not sep:
            raise _bare_word(word, opts)
        root, _, rest = key.partition(".")
        o = opts.get(root)
        if o is not None and o.is_dict and not rest:
            raise UserError(key, f"expected {o.label}=value", f"e.g. {o.meta.get('example') or o.label + '=...'}")
        if o is None or bool(rest) != o.is_dict:
            close = difflib.get_close_matches(key, [p.label for p in opts.values()], n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            valid = ", ".join(p.label for p in opts.values())
            raise UserError(key, "unknown option", f"{hint}valid: {valid}")
        value = _value(o, text)
        _check_choices(o, key, value)
        try:
            if o.is_dict:
                cfg[root][rest] = value
            elif o.meta.get("repeat") and key in given:
                cfg[key] = [*cfg[key], *value]
            else:
                cfg[key] = value
        except ValidationError:
            raise UserError(key, f"expected {o.describe()}, got {text!r}", f"e.g. {key}={o.example()}") from None
        given.add(key)
    for o in opts.values():
        if o.meta.get("required") and (OmegaConf.is_missing(cfg, o.name) or cfg[o.name] in (None, [])):
            raise UserError(o.name, "required", f"give {o.name}={o.metavar()}, e.g. {o.name}={o.example()}")
    return OmegaConf.to_object(cfg)


def expand_paths(option_name: str, values: list[str]) -> list[Path]:
    """Paths as given, with glob patterns (``*``, ``?``, ``[...]``, ``**``) expanded here: bash does not
    glob inside a ``key=value`` word. A pattern's matches come sorted; a pattern that matches nothing
    raises :class:`UserError` naming it. ``~`` is expanded too."""
    paths: list[Path] = []
    for text in values:
        text = os.path.expanduser(str(text))
        if not GLOB.search(text):
            paths.append(Path(text))
            continue
        matches = sorted(glob.glob(text, recursive=True))
        if not matches:
            raise UserError(f"{option_name}={text}", "no file or folder matches this pattern",
                            "check the path; the tool expands * ? [...] itself")  # fmt: skip
        paths += map(Path, matches)
    return paths


def run_main(main: Callable[[list[str] | None], int | None], argv: list[str] | None = None) -> None:
    """``sys.exit(main(argv))``, but a user error prints ``error: <message>`` on
    one line and exits with code 2 (no traceback)."""
    try:
        code = main(argv)
    except Exception as err:  # noqa: BLE001 (filtered just below; everything else re-raised)
        if not isinstance(err, InputError):
            raise
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    sys.exit(code or 0)


def override_error(err: Exception, configs: Path, overrides: list[str] = ()) -> UserError:
    """Hydra's multi-line composition error as one :class:`UserError`; the group
    choices among ``overrides`` pick the config whose keys are suggested."""
    text = str(err)
    missing = re.search(r"Could not (?:find|load) '([\w/]+)/([^']+)'", text)
    if missing:
        group, name = missing.groups()
        options = sorted(p.stem for p in (configs / group).glob("*.yaml"))
        if group == "encoding":
            from vitpos.validate import _encoding_names

            return UserError(group, f"no encoding {name!r}", _encoding_names(True))
        return UserError(group, f"no config {name!r}", f"valid: {', '.join(options)}")
    bad = re.search(r"Could not (?:override|append to) '([^']+)'", text) or re.search(r"full_key: (\S+)", text)
    if bad:
        key = bad.group(1).lstrip("+~")
        section, _, leaf = key.rpartition(".")
        choices = [o for o in overrides if "=" in o and "." not in o.split("=")[0] and not o.startswith("+")]
        known = _known_keys(configs, section, choices)
        close = difflib.get_close_matches(leaf, known, n=1)
        prefix = section + "." if section else ""
        if close:
            hint = f"did you mean {prefix}{close[0]}?"
        else:
            hint = f"valid: {', '.join(prefix + k for k in known)}" if known else "see configs/train.yaml"
        return UserError(key, "no such option", f"{hint}; +{key}=... adds a new key")
    first = " ".join(text.split())
    return UserError("command line", first[:300], "python train.py --help")


def _known_keys(configs: Path, section: str, choices: list[str]) -> list[str]:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    try:
        with initialize_config_dir(str(configs), version_base="1.3"):
            cfg = compose("train", overrides=choices)
        node = OmegaConf.select(cfg, section) if section else cfg
        return list(node.keys()) if node is not None and hasattr(node, "keys") else []
    except Exception:  # noqa: BLE001 (only a hint)
        return []


# ------------------------------------------------------------------ console
#: (message regex, why it is harmless here)
KNOWN_WARNINGS = (
    (r".*isinstance\(treespec, LeafSpec\)` is deprecated.*", "inside lightning's pytree helper, not our code"),
    (r".*smaller than the logging interval.*", "short runs log once per epoch anyway"),
    (r".*Checkpoint directory .* exists and is not empty.*", "resume writes into its own run folder on purpose"),
    (r".*does not have many workers.*", "data sets are decoded into memory; workers would only copy them"),
    (r".*module\(s\) in eval mode at the start of training.*", "the EMA copy (task.ema_decay) is never trained"),
)


class _DropAdvert(logging.Filter):
    """Drops Lightning's logger advertisement (the litlogger / tensorboardX tip)."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return "litlogger" not in text and "tensorboardX" not in text


def quiet_console() -> None:
    """Silence the known third-party warnings and set up the ``vitpos`` logger (once)."""
    for message, _why in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=message)
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropAdvert) for f in logger.filters):
            logger.addFilter(_DropAdvert())
    log = logging.getLogger("vitpos")
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def quiet_side_by_side() -> None:
    """Jobs that a joblib sweep runs side by side print at the same time, so only their labelled
    lines stay: the sweep's start and end line per job (name, minutes, test/acc) and each epoch's
    line (``<run>/seed<k>: epoch ...``). Lightning's and vitpos's setup lines go (warnings and errors
    stay); the caller leaves out the final metrics block (metrics.json and the end line have it)."""
    for name in ("lightning.pytorch", "lightning.fabric", "vitpos"):
        logging.getLogger(name).setLevel(logging.WARNING)


def progress_bar(run_name: str):
    """Lightning's default progress bar (Rich when installed, else tqdm) showing
    ``run: <run_name>`` instead of the logger's ``v_num``."""
    from lightning.pytorch.callbacks import TQDMProgressBar
    from lightning.pytorch.callbacks.progress.rich_progress import _RICH_AVAILABLE, RichProgressBar

    base = RichProgressBar if _RICH_AVAILABLE else TQDMProgressBar

    class NamedProgressBar(base):
        def get_metrics(self, trainer, pl_module):
            items = super().get_metrics(trainer, pl_module)
            items.pop("v_num", None)
            return {"run": run_name, **items}

    return NamedProgressBar()


def summary_line(module) -> str:
    """One line in place of Lightning's model summary table."""
    model = module.model
    params = sum(p.numel() for p in model.parameters())
    pos = sum(p.numel() for p in model.pos.parameters())
    return f"model: {type(model).__name__}, {params / 1e3:.1f}k parameters ({pos / 1e3:.1f}k in the encoding)"
