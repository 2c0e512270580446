"""What the command-line entry points share: ``key=value`` parsing for the
``python -m vitpos.*`` tools (Hydra style, without composing a config) and
:func:`run_main`, which turns a user error into one line ``error: ...`` and
exit code 2 instead of a traceback (issue 10).
"""

from __future__ import annotations

import ast
import difflib
import re
import sys
from collections.abc import Callable
from pathlib import Path

from vitpos.validate import UserError


def parse_value(text: str):
    """'[16,24]' -> [16, 24]; '3' -> 3; 'all' -> 'all'."""
    if text.startswith("[") and text.endswith("]"):
        return [parse_value(t.strip()) for t in text[1:-1].split(",") if t.strip()]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_args(argv: list[str], allowed: dict[str, object], repeatable=(), usage: str = "") -> dict:
    """``key=value`` words -> dict, starting from the defaults in ``allowed``.

    Keys in ``repeatable`` collect every occurrence into a list; dotted keys
    (``data.root=...``) are kept as written. ``-h``/``--help`` prints ``usage``
    and exits 0; unknown keys raise :class:`UserError` with the valid ones.
    """
    out = {k: (list(v) if k in repeatable and v is not None else v) for k, v in allowed.items()}
    seen = set()
    valid = ", ".join(f"{k}<key>" if k.endswith(".") else k for k in allowed)
    for word in argv:
        if word in ("-h", "--help"):
            print(usage.strip("\n"))
            raise SystemExit(0)
        key, sep, value = word.partition("=")
        if not sep:
            raise UserError(word, "expected key=value", f"valid keys: {valid}; --help for the usage")
        root = key.split(".")[0]
        if key not in allowed and f"{root}." not in allowed:
            close = difflib.get_close_matches(key, list(allowed), n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise UserError(key, "unknown option", f"{hint}valid: {valid}")
        if key in repeatable:
            values = parse_value(value)
            out[key] = (out[key] if key in seen else []) + (values if isinstance(values, list) else [values])
        else:
            out[key] = parse_value(value)
        seen.add(key)
    return out


def user_error_types() -> tuple[type[BaseException], ...]:
    """The exceptions that mean "the input was wrong": :class:`UserError`, the
    data errors of ``vitpos.data`` and unsafe/corrupt checkpoints (when those
    modules define them)."""
    import importlib

    found: list[type[BaseException]] = [UserError]
    for module, names in (
        ("vitpos.data.cifar10", ("DatasetNotFoundError", "DataError")),
        ("vitpos.data", ("DataError",)),
        ("vitpos.data.errors", ("DataError",)),
        ("vitpos.safe_load", ("CheckpointError",)),
        ("vitpos.callbacks", ("DivergenceError",)),
    ):
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        found += [getattr(mod, n) for n in names if isinstance(getattr(mod, n, None), type)]
    return tuple(dict.fromkeys(found))


def run_main(main: Callable[[list[str] | None], int | None], argv: list[str] | None = None) -> None:
    """``sys.exit(main(argv))``, but a user error prints ``error: <message>`` on
    one line and exits with code 2 (no traceback)."""
    try:
        code = main(argv)
    except Exception as err:  # noqa: BLE001 (filtered just below; everything else re-raised)
        if not isinstance(err, user_error_types()):
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
