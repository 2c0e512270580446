"""docs/architecture.md names every module of the package, and only modules that exist, and
its table of allowed imports holds every import between the package's parts.

A module is every ``.py`` file below ``vitpos/`` on disk, ``__init__.py`` and
``__main__.py`` included (a package's ``__init__`` holds its public API or its
command's help, so it has a job too). The page names each one in path form,
``vitpos/run/folder.py``, in its table of modules; a module added without a
line there, or a line left behind by a module that moved, fails here.

A part is a top-level module or subpackage of ``vitpos`` (``vitpos.train``,
``vitpos.compare``, ...): every import in its files, at module level or inside a
function, of another part is an edge, and an edge the page's table does not
allow fails here with the file and line of the import.
"""

import re
from pathlib import Path

from test_imports import find_cycle, import_lines, modules

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
EDGES_HEADING = "## Who may import whom"
# a path that starts at vitpos/ (not the tail of another path) and ends in .py
NAMED = re.compile(r"(?<![\w/.])vitpos/(?:\w+/)*\w+\.py\b")


def modules_on_disk() -> set[str]:
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / "vitpos").rglob("*.py") if "__pycache__" not in p.parts}


def modules_named(text: str) -> set[str]:
    return set(NAMED.findall(text))


def table_rows(text: str) -> set[str]:
    """The modules that have a row of their own in the page's module table: ``| `vitpos/x.py` | job |``."""
    return set(re.findall(r"^\| `(vitpos/(?:\w+/)*\w+\.py)` \| *[^|\s]", text, flags=re.M))


def encoding_modules() -> set[str]:
    """The modules that register a built-in encoding: each is one file with its job in its docstring,
    so adding one edits no table (a row for it is welcome, not required)."""
    import inspect

    from vitpos.encodings import get_encoding_class, list_encodings

    files = {inspect.getsourcefile(get_encoding_class(name)) for name in list_encodings()}
    return {str(Path(f).relative_to(ROOT)) for f in files}


def test_every_module_has_a_row_with_its_job():
    missing = sorted(modules_on_disk() - table_rows(PAGE.read_text()) - encoding_modules())
    assert not missing, (
        f"modules under vitpos/ without a row `| `path` | job |` in {PAGE.relative_to(ROOT)}: " + ", ".join(missing)
    )


# An encoding's module opens with its formula, its conventions and its deliberate differences from the
# reference, in a docstring a reader takes in at a glance; where each convention was read, at which
# commit, and what the tests check is told in full in docs/encodings.md.
MAX_ENCODING_DOCSTRING_LINES = 25


def test_every_encoding_module_opens_with_a_short_docstring():
    """Every module that registers a built-in encoding, and every other module of vitpos/encodings/
    (``CrossModalRoPE``, the strategies, the registry), opens with at most 25 lines of docstring."""
    import ast

    folder = {p.relative_to(ROOT).as_posix() for p in (ROOT / "vitpos" / "encodings").glob("*.py")}
    too_long = []
    for name in sorted(encoding_modules() | folder):
        doc = ast.get_docstring(ast.parse((ROOT / name).read_text())) or ""
        if not doc or len(doc.splitlines()) > MAX_ENCODING_DOCSTRING_LINES:
            too_long.append(f"{name}: {len(doc.splitlines())} lines" if doc else f"{name}: no docstring")
    assert not too_long, (
        f"an encoding's module docstring holds its formula, conventions and deliberate differences in at most "
        f"{MAX_ENCODING_DOCSTRING_LINES} lines; move the provenance (reference repository, file, commit, what "
        "the tests check) to docs/encodings.md and point there: " + "; ".join(too_long)
    )


def test_the_page_names_no_module_that_does_not_exist():
    stale = sorted(modules_named(PAGE.read_text()) - modules_on_disk())
    assert not stale, f"{PAGE.relative_to(ROOT)} names modules that are not on disk: {', '.join(stale)}"


def test_the_path_of_a_run_names_the_owner_of_each_step():
    """The drawing names the modules that own the steps config -> run identity
    -> data -> task -> model -> encoding -> logs -> compare / extrapolate / viz."""
    text = PAGE.read_text()
    drawing = text.split("## The path of one training run", 1)[1].split("\n## ", 1)[0]
    owners = [
        "vitpos/validate.py",
        "vitpos/run/identity.py",
        "vitpos/tasks/build.py",
        "vitpos/data/images.py",
        "vitpos/models/vit.py",
        "vitpos/encodings/base.py",
        "vitpos/run/status.py",
        "vitpos/compare/summary.py",
        "vitpos/extrapolate/checkpoints.py",
        "vitpos/viz/__main__.py",
    ]
    absent = [m for m in owners if m not in modules_named(drawing)]
    assert not absent, f"the drawing in {PAGE.relative_to(ROOT)} does not name: {', '.join(absent)}"
    positions = [drawing.index(m) for m in owners[:7]]
    assert positions == sorted(positions), "the drawing's steps are out of the order of a run"


def part(module: str) -> str:
    """The top-level part of a module name: ``vitpos.run.folder`` -> ``vitpos.run``, ``vitpos`` -> ``vitpos``."""
    return ".".join(module.split(".")[:2])


def allowed_imports(text: str) -> dict[str, set[str]]:
    """{part: the parts it may import} from the table under :data:`EDGES_HEADING`: rows
    ``| `vitpos.x` | `vitpos.y`, `vitpos.z` |`` (a cell without names: it imports no other part)."""
    section = text.split(EDGES_HEADING, 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(vitpos(?:\.\w+)?)` \|([^|\n]*)\|", section, flags=re.M)
    return {name: set(re.findall(r"`(vitpos(?:\.\w+)?)`", cell)) for name, cell in rows}


def parts_on_disk() -> set[str]:
    return {part(name) for name in modules()}


def imports_between_parts() -> list[tuple[str, str, str]]:
    """(importing part, imported part, ``file:line``) of every import of one part by another."""
    known = modules()
    found = []
    for name, path in known.items():
        for target, line in import_lines(name, path, known):
            if part(target) != part(name):
                found.append((part(name), part(target), f"{path.relative_to(ROOT).as_posix()}:{line}"))
    return found


def test_every_import_between_parts_is_an_edge_the_page_allows():
    allowed = allowed_imports(PAGE.read_text())
    found = imports_between_parts()
    assert len(found) > 50 and {"vitpos.models", "vitpos.train"} <= {src for src, _, _ in found}  # the walk worked
    bad = sorted({f"{where}: {src} imports {dst}" for src, dst, where in found if dst not in allowed.get(src, set())})
    assert not bad, (
        f"imports that the table under '{EDGES_HEADING}' in {PAGE.relative_to(ROOT)} does not allow "
        "(move the code down a layer, or add the edge there if it points one way):\n" + "\n".join(bad)
    )


def test_the_import_table_has_a_row_for_every_part_and_only_for_parts():
    allowed = allowed_imports(PAGE.read_text())
    on_disk = parts_on_disk()
    named = set(allowed) | {dst for targets in allowed.values() for dst in targets}
    assert set(allowed) == on_disk, (
        f"{PAGE.relative_to(ROOT)}, '{EDGES_HEADING}': parts without a row: {sorted(on_disk - set(allowed))}; "
        f"rows of parts not on disk: {sorted(set(allowed) - on_disk)}"
    )
    assert named <= on_disk, f"the table allows imports of parts not on disk: {sorted(named - on_disk)}"
    assert not allowed["vitpos.encodings"], "vitpos/encodings/ imports torch and itself only"


def test_the_allowed_imports_point_one_way():
    """Arrows point one way: the table itself has no cycle (so neither have the imports it allows)."""
    cycle = find_cycle(allowed_imports(PAGE.read_text()))
    assert cycle is None, "the table of allowed imports has a cycle: " + " -> ".join(cycle)


# A reference to a tracker entry by its number means nothing to a reader of the code: say what the code does.
TRACKER_REFERENCE = re.compile(r"\bissues? #?\d", flags=re.I)
#: a speed figure: a time in ms/µs or "Nx faster/slower" (figures go stale: docs/performance.md holds them)
SPEED_FIGURE = re.compile(r"\b\d+(\.\d+)?\s?(ms|µs|us)\b|\d(\.\d+)?x (faster|slower)\b")


def lines_matching(pattern: re.Pattern, folders: tuple[str, ...]) -> list[str]:
    """``path:line: text`` of every line of the Python files under ``folders`` that ``pattern`` finds."""
    return [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}"
        for folder in folders
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]


def test_no_code_or_test_points_to_a_tracker_issue_instead_of_saying_what_it_does():
    found = lines_matching(TRACKER_REFERENCE, ("vitpos", "tests", "scripts", "bench"))
    assert not found, "say what the code does instead:\n  " + "\n  ".join(found)


#: what only the authors' way of working would explain: tracker numbers, how machines were provided
NOT_ABOUT_THE_PROJECT = re.compile(r"\bissues?[ _#-]?[0-9]|\bworkplace\b|\blent\b|\bleased?\b|stored index", re.I)
TEXT_SUFFIXES = (".py", ".md", ".yaml", ".sh", ".txt", ".toml")


def test_the_project_speaks_of_itself_only():
    """README, docs, configs, code, tests, scripts and benchmarks say what a result is, when and on
    what machine it was measured, never a tracker number or how the work was organised."""
    files = [ROOT / "README.md", ROOT / "pyproject.toml"] + [
        path
        for folder in ("docs", "configs", "vitpos", "tests", "scripts", "bench")
        for path in sorted((ROOT / folder).rglob("*"))
        if path.suffix in TEXT_SUFFIXES and path != Path(__file__) and "runs" not in path.relative_to(ROOT).parts
    ]
    assert len(files) > 200
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}"
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if NOT_ABOUT_THE_PROJECT.search(line)
    ]
    assert not found, "say what it is, when and on what machine instead:\n  " + "\n  ".join(found)


def test_no_speed_figure_lives_in_the_code():
    """The code says why a kernel is chosen; the measured figure, which goes stale as torch changes,
    lives in docs/performance.md with its source and machine."""
    found = lines_matching(SPEED_FIGURE, ("vitpos",))
    assert not found, "move the figure to docs/performance.md:\n  " + "\n  ".join(found)


#: test doubles: ``unittest.mock`` in any form (``from unittest import mock``, ``import unittest.mock``, ``mock.patch``)
TEST_DOUBLE = re.compile(r"\bunittest\.mock\b|\bfrom\s+unittest\s+import\b.*\bmock\b|\bimport\s+mock\b|\bmock\.patch")


def test_no_code_outside_the_tests_patches_with_mock():
    """Patching is for tests: the package, its Hydra plugins, train.py, scripts and benchmarks get
    what they need through the APIs they use (a launcher overrides its plugin's ``launch``; it
    does not patch submitit while it runs)."""
    found = lines_matching(TEST_DOUBLE, ("vitpos", "hydra_plugins", "scripts", "bench"))
    found += [f"train.py:{n}: {line.strip()}" for n, line in enumerate((ROOT / "train.py").read_text().splitlines(), 1)
              if TEST_DOUBLE.search(line)]  # fmt: skip
    assert not found, "patching outside tests/:\n  " + "\n  ".join(found)
    old = "        from unittest import mock  # here, not at the top\n        with mock.patch.object(a, 'b', c):"
    assert all(TEST_DOUBLE.search(line) for line in old.splitlines())  # the forms it looks for
