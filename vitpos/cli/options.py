"""The ``key=value`` options of every ``python -m vitpos.*`` tool and ``bench`` (``train.py``'s go through Hydra):
a dataclass of :func:`~vitpos.config.rules.option` fields, onto which :func:`parse_options` parses argv (OmegaConf
checks the types, then each field's ``rule``); :func:`help_text` builds --help.
"""

from __future__ import annotations

import dataclasses
import difflib
import glob
import inspect
import os
import re
import sys
import typing
from pathlib import Path
from typing import Any

from omegaconf import MISSING, OmegaConf, ValidationError

from vitpos.config.rules import Flag, Int, Number, check_value, option
from vitpos.errors import UserError

__all__ = ["expand_paths", "help_text", "option", "parse_options"]
KINDS = {int: Int, float: Number, bool: Flag}  # a typed option's wording: its rule kind's
METAVARS = {int: "INT", float: "FLOAT", bool: "true|false", str: "TEXT"}


class _Option:
    """One field's kind and metadata, as the parser needs them."""

    def __init__(self, f: dataclasses.Field, hint):
        self.name, self.meta = f.name, dict(f.metadata)
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        self.optional = type(None) in typing.get_args(hint)
        base = args[0] if self.optional and len(args) == 1 else hint
        self.is_list, self.is_dict = typing.get_origin(base) is list, typing.get_origin(base) is dict or base is dict
        self.label = f"{self.name}.<key>" if self.is_dict else self.name
        self.item = (typing.get_args(base) or (Any,))[0] if self.is_list else base
        self.raw = self.item is str  # paths and names: taken as typed, never parsed as YAML
        self.default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        self.kind = KINDS.get(self.item)

    def metavar(self) -> str:
        choices = self.meta.get("choices")
        item = "|".join(map(str, choices)) if choices else METAVARS.get(self.item, "VALUE")
        return self.meta.get("metavar") or (f"[{item},...]" if self.is_list else item)

    def example(self) -> str:
        """A value for an error: the declared example, else the default, else one from the type."""
        if "example" in self.meta:
            return str(self.meta["example"])
        if self.item is bool and not self.is_list:
            return Flag.sample
        if self.default not in (None, MISSING, [], {}):
            return _show(self.default)
        if self.meta.get("metavar"):
            return self.meta["metavar"]
        item = self.kind.sample if self.item in (int, float) else "VALUE"
        return f"[{item}]" if self.is_list else item

    def describe(self) -> str:
        if self.is_list:
            return f"a list of {self.kind.plural}" if self.item in (int, float) else "a list"
        return self.kind.noun if self.kind else {str: "text"}.get(self.item, "a value")


def _show(value) -> str:
    """A value as typed on the command line: [16,24], true, none."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_show(v) for v in value) + "]"
    return "none" if value is None else str(value)


def _options(schema: type) -> dict[str, _Option]:
    hints = typing.get_type_hints(schema)
    return {f.name: _Option(f, hints[f.name]) for f in dataclasses.fields(schema)}


def help_text(schema: type, prog: str, usage: str | None = None) -> str:
    """``usage: <prog> ...``, the schema's docstring, then one line per option."""
    opts = _options(schema)
    if usage is None:
        lead = [f"[{o.name.upper().rstrip('S')} ...]" for o in opts.values() if o.meta.get("words")]
        must = [f"{o.name}={o.metavar()}" for o in opts.values() if o.meta.get("required")]
        usage = " ".join([*lead, *must, "[key=value ...]"])
    rows = []
    for o in opts.values():
        extra = "; repeatable" if o.meta.get("repeat") else ""
        end = "(required)" if o.meta.get("required") else f"(default: {o.meta.get('default_text') or _show(o.default)})"
        rows.append((f"{o.label}={o.metavar()}", f"{o.meta['help']}{extra} {end}"))
    rows.append(("-h, --help", "show this help and exit"))
    width = min(max(len(r[0]) for r in rows) + 2, 30)
    lines = [f"usage: {prog} {usage}", "", inspect.cleandoc(schema.__doc__ or ""), ""]
    lines.append("Options (key=value, as for train.py; lists as [a,b]):")
    for left, right in rows:
        lines.append(f"  {left:<{width}}{right}" if len(left) < width else f"  {left}\n  {'':<{width}}{right}")
    return "\n".join(lines)


def _literal(value):
    """``value`` with ``${`` escaped (and backslashes before it doubled), never read as an interpolation."""
    if isinstance(value, str):
        return re.sub(r"(\\*)\$\{", lambda m: m.group(1) * 2 + "\\${", value)
    if isinstance(value, list):
        return [_literal(v) for v in value]
    if isinstance(value, dict):
        return {k: _literal(v) for k, v in value.items()}
    return value


def _value(o: _Option, text: str):
    """``text`` as the option's value: a text option (or list of them) as typed, any other as OmegaConf reads it."""
    if o.raw and o.is_list:
        bracketed = text.startswith("[") and text.endswith("]")
        return _literal([t.strip() for t in text[1:-1].split(",") if t.strip()] if bracketed else [text])
    if o.raw:
        return None if o.optional and text in ("null", "none", "None") else _literal(text)
    try:  # as OmegaConf parses key=value: 3, 0.5, true, [16,24], null
        value = _literal(OmegaConf.to_container(OmegaConf.from_dotlist([f"value={text}"]))["value"])
    except Exception:  # noqa: BLE001 (a YAML syntax error: then it is plain text)
        value = _literal(text)
    return [value] if o.is_list and value is not None and not isinstance(value, list) else value


def _named(text: str) -> str:
    """``text`` as a one-line error names it: quoted if empty or holding whitespace or control characters."""
    return text if text and text.isprintable() and not any(c.isspace() for c in text) else repr(text)


def _bare_word(word: str, opts: dict[str, _Option], words: _Option | None) -> UserError:
    """The error for a word without ``=``, saying how to write it as ``key=value``."""
    valid = ", ".join(o.label for o in opts.values())
    if not word.strip():  # '' or ' ': a stray quote or an empty variable in the shell
        return UserError(_named(word), "an empty word, not key=value", f"leave it out; valid keys: {valid}")
    if word.startswith("-"):  # an argparse habit: --out DIR
        name = word.lstrip("-").replace("-", "_")
        fix = f"write {name}={opts[name].example()}" if name in opts else f"valid keys: {valid}"
        return UserError(_named(word), "expected key=value", f"{fix}; --help for the usage")
    if words is not None:  # a misspelt subcommand (``words``: the option bare words fill)
        choices = words.meta.get("choices") or []
        return UserError(_named(word), f"unknown {words.name.rstrip('s')}", _closest(word, choices))
    first = next(iter(opts.values()))  # the main option comes first: runs=, ckpt=
    fix = f"did you mean {first.name}={_named(word)}? valid keys: {valid}; --help for the usage"
    return UserError(_named(word), "expected key=value", fix)


def _closest(word: str, valid: list[str]) -> str:
    """The fix for an unknown ``word``: ``did you mean <closest>? valid: <all>``."""
    close = difflib.get_close_matches(word, valid, n=1)
    return f"{f'did you mean {close[0]}? ' if close else ''}valid: {', '.join(valid)}"


def _check_rules(o: _Option, key: str, value) -> None:
    """The field's ``choices`` and ``rule`` (:func:`vitpos.config.rules.check_value`, as the config check)."""
    if o.meta.get("rule") is not None:
        check_value(key, o.meta["rule"], value)
    choices = o.meta.get("choices")
    for item in (value if isinstance(value, list) else [value]) if choices else []:
        if item not in choices:
            raise UserError(key, f"unknown {_named(_show(item))}", _closest(str(item), list(map(str, choices))))


def parse_options(argv: list[str] | None, schema: type, prog: str, usage: str | None = None):
    """``key=value`` words -> an instance of the dataclass ``schema``. Values parse as in OmegaConf, but text options
    (paths, names) are taken as typed; a repeated key keeps its last value, as in Hydra, unless it is ``repeat``.
    ``--help`` prints :func:`help_text`; bad input raises :class:`UserError`."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(word in ("-h", "--help") for word in argv):
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
            raise _bare_word(word, opts, words)
        root, _, rest = key.partition(".")
        o, name = opts.get(root), _named(key)
        if o is not None and o.is_dict and not rest:
            raise UserError(name, f"expected {o.label}=value", f"e.g. {o.meta.get('example') or o.label + '=...'}")
        if o is None or bool(rest) != o.is_dict:
            raise UserError(name, "unknown option", _closest(key, [p.label for p in opts.values()]))
        value = _value(o, text)
        _check_rules(o, key, value)
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
    """Paths with ``~`` and globs expanded (bash does not glob in ``key=value``), sorted; no match: UserError."""
    paths: list[Path] = []
    for text in values:
        text = os.path.expanduser(str(text))
        matches = sorted(glob.glob(text, recursive=True)) if re.search(r"[*?[]", text) else [text]
        if not matches:
            raise UserError(f"{option_name}={text}", "no file or folder matches this pattern",
                            "check the path; the tool expands * ? [...] itself")  # fmt: skip
        paths += map(Path, matches)
    return paths
