"""The encoding group's options without a YAML file: every built-in encoding composes as ``encoding=<name>``.

An encoding is one file in ``vitpos/encodings/`` (a class registered by its ``name``); its options are its
``__init__`` arguments, checked by the class itself when the config check builds it. A file
``configs/encoding/<name>.yaml`` is needed only for a preset that differs from the defaults (``pape_ri``). For
the others, :func:`builtin_names` reads the registered names from the package's source with :mod:`ast`, without
importing it (the command refuses bad input before torch loads), and :func:`vitpos.config.register` stores
``{name: <name>}`` as the group option ``encoding/<name>``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import vitpos

ENCODINGS = Path(vitpos.__file__).resolve().parent / "encodings"


def builtin_names(folder: Path = ENCODINGS) -> list[str]:
    """The ``name`` of every class decorated ``@register`` in the modules of ``folder``, sorted."""
    names = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and any(_is_register(d) for d in node.decorator_list):
                names += [_class_name(statement) for statement in node.body if _class_name(statement)]
    return sorted(names)


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
