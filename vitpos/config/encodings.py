"""The encoding group's schema, read from the encodings' own source: every built-in encoding composes as
``encoding=<name>``, each of its options overridable as ``encoding.<option>=...`` without a ``+``.

An encoding's options are its ``__init__`` arguments and those of the bases it passes ``**kw`` on to (it checks
their values itself). :func:`builtin_options` reads them with :mod:`ast`, without importing torch (bad input is
refused before it loads), as :meth:`PositionalEncoding.option_names` finds them at run time (a test compares the
two). A default that is no literal (:data:`UNREAD`) and a plug-in's options are set with ``+``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import vitpos

ENCODINGS = Path(vitpos.__file__).resolve().parent / "encodings"
#: a default :func:`builtin_options` cannot read from the source (no literal): (encoding, option) pairs
UNREAD: set[tuple[str, str]] = set()


@dataclass
class _Source:
    """One class of the encodings package as its source declares it."""

    name: str | None  # its registered name (``name = "..."`` under ``@register``), else None
    bases: list[str]  # the names of its bases, in order
    options: dict[str, object] | None  # its ``__init__``'s keyword options and defaults; None: no ``__init__``
    unread: set[str] = field(default_factory=set)  # options whose default is no literal
    passes_on: bool = True  # its ``__init__`` takes ``**kw`` (or it has none): the bases' options are its too


def builtin_names(folder: Path = ENCODINGS) -> list[str]:
    """The ``name`` of every class decorated ``@register`` in the modules of ``folder``, sorted."""
    return sorted(builtin_options(folder))


@lru_cache(maxsize=4)
def builtin_options(folder: Path = ENCODINGS) -> dict[str, dict[str, object]]:
    """``{name: {option: default}}`` of every registered encoding in ``folder``, bases in method resolution
    order; without ``self`` and ``ctx``, tuples as lists (as in a config)."""
    classes: dict[str, _Source] = {}
    for path in sorted(folder.glob("*.py")):
        constants: dict[str, object] = {}  # the module's ``NAME = <literal>`` so far, which a default may name
        for node in ast.parse(path.read_text(), str(path)).body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            target = node.target if isinstance(node, ast.AnnAssign) and node.value is not None else target
            if isinstance(target, ast.Name):
                try:
                    constants[target.id] = as_lists(ast.literal_eval(node.value))
                except ValueError:
                    continue
            elif isinstance(node, ast.ClassDef):
                classes[node.name] = _read_class(node, constants)
    out = {}
    for class_name, source in sorted(classes.items(), key=lambda item: str(item[1].name)):
        if source.name is None:
            continue
        options = out[source.name] = {}
        for base in _resolution_order(class_name, classes):
            for option, default in (base.options or {}).items():
                options.setdefault(option, default)
            UNREAD.update((source.name, option) for option in base.unread if option not in options)
            if base.options is not None and not base.passes_on:
                break
    return out


def _read_class(node: ast.ClassDef, constants: dict[str, object]) -> _Source:
    """The registered name, bases and ``__init__`` options of the class ``node``."""
    registered = any(isinstance(d, ast.Name) and d.id == "register" for d in node.decorator_list)
    name = None
    for s in node.body if registered else []:  # its ``name = "..."``
        if name is None and isinstance(s, ast.Assign) and [getattr(t, "id", None) for t in s.targets] == ["name"]:
            name = s.value.value if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str) else None
    bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
    init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    if init is None:
        return _Source(name, bases, None)
    args = init.args
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    options, unread = {}, set()
    for arg, default in [*zip(positional, defaults), *zip(args.kwonlyargs, args.kw_defaults)]:
        if arg.arg in ("self", "ctx"):
            continue
        if isinstance(default, ast.Name) and default.id in constants:
            options[arg.arg] = constants[default.id]
            continue
        try:
            options[arg.arg] = None if default is None else as_lists(ast.literal_eval(default))
        except ValueError:
            unread.add(arg.arg)
    return _Source(name, bases, options, unread, passes_on=args.kwarg is not None)


def as_lists(value):
    """``value`` with every tuple a list (a config has lists; a signature's default is often a tuple)."""
    if isinstance(value, (tuple, list)):
        return [as_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: as_lists(v) for k, v in value.items()}
    return value


def _resolution_order(class_name: str, classes: dict[str, _Source]) -> list[_Source]:
    """The class and its bases in the package in Python's method resolution order (stand-in classes give it); a
    base from outside (``nn.Module``) is left out."""
    made: dict[str, type] = {}

    def make(name: str) -> type:
        if name not in made:
            made[name] = type(name, tuple(make(b) for b in classes[name].bases if b in classes), {})
        return made[name]

    return [classes[c.__name__] for c in make(class_name).__mro__[:-1]]


def files_missing(config_dir: Path) -> list[str]:
    """The built-in encodings that have no ``<config_dir>/encoding/<name>.yaml``."""
    return [name for name in builtin_names() if not (config_dir / "encoding" / f"{name}.yaml").is_file()]
