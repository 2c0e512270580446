"""The import graph of ``vitpos`` has no cycle.

Every ``import`` and ``from ... import`` in every module of the package is an
edge, whether at module level or inside a function (an import inside a
function hides a cycle from Python but not from this test). ``from pkg import
name`` points at the module ``pkg.name`` when that is a module, else at ``pkg``.
Relative imports are resolved against the importing module's package.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "vitpos"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def import_lines(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int]]:
    """(vitpos module imported, line) of every import in module ``name`` (at ``path``), anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # import vitpos.a.b -> the deepest module that exists
                target = target.rpartition(".")[0]
            if target and target != name:
                found.append((target, node.lineno))
    return sorted(found, key=lambda t: t[1])


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Names of the vitpos modules that ``name`` (at ``path``) imports, anywhere in its body."""
    return {target for target, _ in import_lines(name, path, known)}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of nodes (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def test_vitpos_import_graph_has_no_cycle():
    graph = import_graph()
    assert len(graph) > 40 and any(graph.values())  # the walk found the package and its imports
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_function_level_imports_are_edges(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text("def f():\n    from vitpos.train import train\n")
    known = modules()
    assert "vitpos.train" in imports_of("vitpos.x", mod, known)


def test_encodings_import_nothing_above_them():
    graph = import_graph()
    outside = {
        (name, target)
        for name, targets in graph.items()
        if name.startswith("vitpos.encodings")
        for target in targets
        if not target.startswith("vitpos.encodings") and target != "vitpos"
    }
    assert not outside
