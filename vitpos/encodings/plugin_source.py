"""Which source files a plug-in encoding is made of, found without running any of them.

A plug-in's identity (part of its run's folder name, recorded in every checkpoint) is the digest of
its whole source: the module that defines it, plus every module of its own package or folder that
it imports, directly or through another such module (``from .helpers import f``,
``import my_pkg.tables``, a sibling ``import helpers`` of a loose file), and the ``__init__.py`` of
each package on the way. Imports are read from the syntax tree (:mod:`ast`), never executed, so a
path read off disk can be digested safely; modules outside the plug-in's own folder tree (torch,
vitpos) are not its code. One file alone keeps the digest it always had: the file's own hash.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
from pathlib import Path

OWN = __name__.split(".")[0]
MAX_FILES = 500  # a folder tree larger than this is not one plug-in: the digest stops growing there


def locate(spec: str) -> tuple[Path, Path, str] | None:
    """(file, the folder its imports resolve from, its module name there) of the plug-in ``spec`` (a
    ``.py`` path or a dotted module name), or None when it cannot be found. A module name is looked up
    package by package with :class:`importlib.machinery.PathFinder`, which runs no ``__init__.py``
    (:func:`importlib.util.find_spec` would import the parent packages)."""
    if spec.endswith(".py") or "/" in spec or "\\" in spec:
        path = Path(spec).expanduser()
        return (path, path.resolve().parent, path.stem) if path.is_file() else None
    parts, search = spec.split("."), None
    for i in range(len(parts)):
        try:
            found = importlib.machinery.PathFinder.find_spec(".".join(parts[: i + 1]), search)
        except (ImportError, ValueError):
            return None
        if found is None or (i < len(parts) - 1 and not found.submodule_search_locations):
            return None
        search = list(found.submodule_search_locations or [])
    if not found.origin or not Path(found.origin).is_file():
        return None
    return module_root(Path(found.origin), spec)


def module_root(path: Path, name: str) -> tuple[Path, Path, str]:
    """(file, the folder its top-level package lies in, its dotted name) for the module ``name`` at ``path``."""
    path = path.resolve()
    depth = len(name.split(".")) - (0 if path.name == "__init__.py" else 1)
    root = path.parents[depth] if depth < len(path.parents) else path.parent
    return path, root, name


def source_files(path: Path, root: Path, name: str) -> list[Path]:
    """``path`` and every module below ``root`` it imports, transitively, with the packages' ``__init__.py``."""
    todo, seen = [(path.resolve(), name)], {}
    for part in range(1, len(name.split("."))):  # the packages imported on the way to the module
        todo += [(f, n) for f, n in [_module_file(root, ".".join(name.split(".")[:part]))] if f]
    while todo and len(seen) < MAX_FILES:
        file, module = todo.pop()
        if file in seen:
            continue
        seen[file] = module
        for imported in imported_names(file, module):
            if imported.split(".")[0] == OWN:
                continue  # this project's code is versioned with it, not with the plug-in
            found, dotted = _module_file(root, imported)
            if found is not None and found not in seen:
                todo.append((found, dotted))
    return sorted(seen, key=lambda f: (f != path.resolve(), str(f)))


def imported_names(file: Path, module: str) -> list[str]:
    """Every dotted name ``file`` (the module ``module``) imports, relative imports resolved; each
    prefix counts too (``import a.b`` runs ``a/__init__.py``). A file that does not parse: none."""
    try:
        tree = ast.parse(file.read_bytes(), str(file))
    except (SyntaxError, ValueError, OSError):
        return []
    package = module.split(".") if file.name == "__init__.py" else module.split(".")[:-1]
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(package):
                    continue
                base = package[: len(package) - (node.level - 1)]
            else:
                base = []
            stem = [*base, *(node.module.split(".") if node.module else [])]
            if stem:
                names.append(".".join(stem))
            names += [".".join([*stem, alias.name]) for alias in node.names if alias.name != "*"]
    prefixes = {".".join(n.split(".")[: i + 1]) for n in names for i in range(len(n.split(".")))}
    return sorted(prefixes)


def _module_file(root: Path, dotted: str) -> tuple[Path | None, str]:
    base = root.joinpath(*dotted.split("."))
    for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate.resolve(), dotted
    return None, dotted


def digest(files: list[Path], root: Path) -> str:
    """12 hex digits: of the one file's bytes, or of every file's path below ``root`` and bytes."""
    if len(files) == 1:
        return hashlib.sha256(files[0].read_bytes()).hexdigest()[:12]
    h = hashlib.sha256()
    for f in sorted(files, key=str):
        rel = f.relative_to(root).as_posix() if f.is_relative_to(root) else f.name
        h.update(rel.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]
