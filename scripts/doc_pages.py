"""The generated tables of the README and the docs: which table quotes which committed report,
and the rewriting of the blocks that hold them.

A page holds each table between two markers::

    <!-- generated: NAME from docs/results/<report>/report.csv by scripts/rebuild_reports.py -->
    | ... |
    <!-- end generated: NAME -->

``python scripts/rebuild_reports.py`` rewrites every block after rebuilding the reports
(:func:`refresh_page`); ``tests/test_doc_tables.py`` fails when a committed page and the
committed report it quotes disagree.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from .doc_tables import (
    aspect_table,
    comparison_headline,
    comparison_runs,
    comparison_top,
    lever_table,
    multires_vs_single,
    native_headline,
    seed_reading,
)
from .report_rows import RESULTS, ROOT, read_csv, read_report

#: the pages that may quote generated tables
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(RESULTS.glob("*/README.md"))]


def _comparison_headline_of(folder: Path) -> str:
    """:func:`comparison_headline` of a committed comparison folder (its report.csv and runs.csv)."""
    return comparison_headline(read_csv(folder / "report.csv"), read_csv(folder / "runs.csv"))


def _levers_of(base: str) -> Callable[[Path], str]:
    """:func:`lever_table` of a committed lever folder, against the lever named ``base``."""
    return lambda folder: lever_table(read_report(folder), read_csv(folder / "runs.csv"), base)


#: NAME -> (the report folder it quotes, the function that turns that folder into the table)
TABLES: dict[str, tuple[str, Callable[[Path], str]]] = {
    "extrapolation_native/headline": ("extrapolation_native", lambda folder: native_headline(read_report(folder))),
    "extrapolation_native/multires": ("extrapolation_native", lambda folder: multires_vs_single(read_report(folder))),
    "extrapolation_aspect/aspect": ("extrapolation_aspect", lambda folder: aspect_table(read_report(folder))),
    "cifar10_full/headline": ("cifar10_full", _comparison_headline_of),
    "cifar10_full/top": (
        "cifar10_full",
        lambda folder: comparison_top(read_csv(folder / "report.csv"), read_csv(folder / "runs.csv")),
    ),
    "cifar10_full/runs": ("cifar10_full", lambda folder: comparison_runs(read_csv(folder / "runs.csv"))),
    "cifar10_full/primary": ("cifar10_full", lambda folder: seed_reading(read_csv(folder / "runs.csv"))),
    "cifar10_full_e11/headline": ("cifar10_full_e11", _comparison_headline_of),
    "cifar10_full_13ep/headline": ("cifar10_full_13ep", _comparison_headline_of),
    "recipe_levers/levers": ("recipe_levers", _levers_of("base")),
    # the bf16 levers start from the 11-epoch comparison recipe
    "recipe_levers_bf16/levers": ("recipe_levers_bf16", _levers_of("progressive_e11")),
}

_BLOCK = re.compile(
    r"(?P<open><!-- generated: (?P<name>\S+) [^\n]*-->\n)(?P<body>.*?)(?P<close><!-- end generated: (?P=name) -->)",
    flags=re.S,
)


def generate(name: str, results: Path = RESULTS) -> str:
    """The table ``name`` of :data:`TABLES`, made from its report under ``results``."""
    if name not in TABLES:
        raise KeyError(f"unknown generated table {name!r}; valid names: {', '.join(TABLES)}")
    folder, make = TABLES[name]
    return make(results / folder)


def blocks(text: str) -> list[tuple[str, str]]:
    """(name, body) of every generated block of a page; an opening marker without its end
    marker is an error."""
    found = [(m["name"], m["body"]) for m in _BLOCK.finditer(text)]
    opened = re.findall(r"<!-- generated: (\S+) ", text)
    if len(opened) != len(found):
        unclosed = sorted(set(opened) - {n for n, _ in found}) or opened
        raise ValueError(f"generated block(s) {unclosed} have no '<!-- end generated: NAME -->' line")
    return found


def refresh(text: str, results: Path = RESULTS) -> str:
    """``text`` with every generated block rewritten from its report."""
    blocks(text)  # checks the markers pair up
    return _BLOCK.sub(lambda m: m["open"] + generate(m["name"], results) + "\n" + m["close"], text)


def refresh_page(path: Path, results: Path = RESULTS) -> bool:
    """Rewrite the generated blocks of one page; True when it changed."""
    old = path.read_text()
    new = refresh(old, results)
    if new != old:
        path.write_text(new)
    return new != old
