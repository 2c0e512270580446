"""docs/architecture.md names every module of the package, and only modules that exist (issue 18).

A module is every ``.py`` file below ``vitpos/`` on disk, ``__init__.py`` and
``__main__.py`` included (a package's ``__init__`` holds its public API or its
command's help, so it has a job too). The page names each one in path form,
``vitpos/run/folder.py``, in its table of modules; a module added without a
line there, or a line left behind by a module that moved, fails here.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
# a path that starts at vitpos/ (not the tail of another path) and ends in .py
NAMED = re.compile(r"(?<![\w/.])vitpos/(?:\w+/)*\w+\.py\b")


def modules_on_disk() -> set[str]:
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / "vitpos").rglob("*.py") if "__pycache__" not in p.parts}


def modules_named(text: str) -> set[str]:
    return set(NAMED.findall(text))


def table_rows(text: str) -> set[str]:
    """The modules that have a row of their own in the page's module table: ``| `vitpos/x.py` | job |``."""
    return set(re.findall(r"^\| `(vitpos/(?:\w+/)*\w+\.py)` \| *[^|\s]", text, flags=re.M))


def test_every_module_has_a_row_with_its_job():
    missing = sorted(modules_on_disk() - table_rows(PAGE.read_text()))
    assert not missing, (
        f"modules under vitpos/ without a row `| `path` | job |` in {PAGE.relative_to(ROOT)}: " + ", ".join(missing)
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


def test_the_pattern_finds_paths_and_only_paths():
    text = "`vitpos/run/folder.py`, vitpos/train.py; not tests/vitpos/x.py, nor vitpos/encodings/<family>.py"
    assert modules_named(text) == {"vitpos/run/folder.py", "vitpos/train.py"}
    assert table_rows("| `vitpos/a/b.py` | its job |\n| `vitpos/c.py` |  |\n") == {"vitpos/a/b.py"}
