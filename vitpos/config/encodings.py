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
    registered: dict[str, str] = {}  # registered name -> class name
    for path in sorted(folder.glob("*.py")):
        module = ast.parse(path.read_text(), str(path))
        constants = _module_constants(module)
        for node in module.body:
            if isinstance(node, ast.ClassDef):
                classes[node.name] = _read_class(node, constants)
                if any(_is_register(d) for d in node.decorator_list) and classes[node.name].name:
                    registered[classes[node.name].name] = node.name
    out = {}
    for name, class_name in sorted(registered.items()):
        options: dict[str, object] = {}
        for source in _resolution_order(class_name, classes):
            if source.options is None:
                continue
            for option, default in source.options.items():
                options.setdefault(option, default)
            UNREAD.update((name, option) for option in source.unread if option not in options)
            if not source.passes_on:
                break
        out[name] = options
    return out


def _read_class(node: ast.ClassDef, constants: dict[str, object]) -> _Source:
    """The registered name, bases and ``__init__`` options of the class ``node``."""
    name = next((n for n in map(_class_name, node.body) if n), None)
    bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
    init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    if init is None:
        return _Source(name, bases, None)
    args = init.args
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = [*zip(positional, defaults), *zip(args.kwonlyargs, args.kw_defaults)]
    options, unread = {}, set()
    for arg, default in pairs:
        if arg.arg in ("self", "ctx"):
            continue
        try:
            options[arg.arg] = _literal(default, constants) if default is not None else None
        except ValueError:
            unread.add(arg.arg)
    return _Source(name, bases, options, unread, passes_on=args.kwarg is not None)


def _literal(node: ast.expr, constants: dict[str, object]):
    """The value of a default: a literal, or the name of a module constant that is one; tuples as lists."""
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    return as_lists(ast.literal_eval(node))


def as_lists(value):
    """``value`` with every tuple a list (a config has lists; a signature's default is often a tuple)."""
    if isinstance(value, (tuple, list)):
        return [as_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: as_lists(v) for k, v in value.items()}
    return value


def _module_constants(module: ast.Module) -> dict[str, object]:
    """The module's top-level ``NAME = <literal>`` assignments."""
    constants = {}
    for node in module.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if target is None and isinstance(node, ast.AnnAssign) and node.value is not None:
            target = node.target
        if isinstance(target, ast.Name):
            try:
                constants[target.id] = as_lists(ast.literal_eval(node.value))
            except ValueError:
                continue
    return constants


def _resolution_order(class_name: str, classes: dict[str, _Source]) -> list[_Source]:
    """The class and its bases in the package in Python's method resolution order (stand-in classes give it); a
    base from outside (``nn.Module``) is left out."""
    made: dict[str, type] = {}

    def make(name: str) -> type:
        if name not in made:
            made[name] = type(name, tuple(make(b) for b in classes[name].bases if b in classes), {})
        return made[name]

    return [classes[c.__name__] for c in make(class_name).__mro__[:-1]] if class_name in classes else []


def _is_register(decorator: ast.expr) -> bool:
    return isinstance(decorator, ast.Name) and decorator.id == "register"


def _class_name(statement: ast.stmt) -> str | None:
    """``"rope_2d"`` for the class attribute ``name = "rope_2d"``, else None."""
    if isinstance(statement, ast.Assign) and [getattr(t, "id", None) for t in statement.targets] == ["name"]:
        value = statement.value
        return value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None
    return None


def files_missing(config_dir: Path) -> list[str]:
    """The built-in encodings that have no ``<config_dir>/encoding/<name>.yaml``."""
    return [name for name in builtin_names() if not (config_dir / "encoding" / f"{name}.yaml").is_file()]
