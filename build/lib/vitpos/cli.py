"""Tiny ``key=value`` argument parsing shared by the ``python -m vitpos.*`` tools
(Hydra style, without composing a config)."""

from __future__ import annotations

import ast


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
    (``data.root=...``) are kept as written. Unknown keys raise SystemExit with
    the valid ones.
    """
    out = {k: (list(v) if k in repeatable and v is not None else v) for k, v in allowed.items()}
    seen = set()
    for word in argv:
        if word in ("-h", "--help"):
            raise SystemExit(usage)
        key, sep, value = word.partition("=")
        if not sep:
            raise SystemExit(f"expected key=value, got '{word}'\n{usage}")
        root = key.split(".")[0]
        if key not in allowed and f"{root}." not in allowed:
            raise SystemExit(f"unknown option '{key}'; valid: {', '.join(allowed)}\n{usage}")
        if key in repeatable:
            values = parse_value(value)
            out[key] = (out[key] if key in seen else []) + (values if isinstance(values, list) else [values])
        else:
            out[key] = parse_value(value)
        seen.add(key)
    return out
