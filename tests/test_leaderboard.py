"""docs/leaderboard.md is what scripts/leaderboard.py makes of the committed reports today, and its
columns are the ratios it says they are."""

from __future__ import annotations

import math

import pytest

from scripts import leaderboard
from scripts.report_rows import RESULTS, read_csv


@pytest.fixture(scope="module")
def rows():
    return leaderboard.leaderboard_rows(RESULTS)


def test_the_committed_page_is_fresh(rows):
    committed = (RESULTS.parent / "leaderboard.md").read_text()
    assert committed == leaderboard.page(rows), "run `python scripts/rebuild_reports.py` and commit docs/leaderboard.*"
    assert (RESULTS.parent / "leaderboard.png").stat().st_size > 20_000


def test_every_encoding_of_the_full_comparison_has_a_row_with_its_ratios(rows):
    full = read_csv(RESULTS / "cifar10_full" / "report.csv")
    assert len(rows) == len(full)
    native = leaderboard.native_rows(RESULTS)["rope_2d"]
    rope = next(r for r in rows if r["encoding"] == "rope_2d")
    assert rope["native"] == pytest.approx(float(native["test/acc@res32_mean"]) / float(native["test/acc@res16_mean"]))
    assert rope["step"] == 1.0 and rope["params"] == 0
    assert all(0 < r["native"] < 1.5 and 0 < r["aspect"] < 1.5 and not math.isnan(r["low"]) for r in rows)
    assert [r["acc"] for r in rows] == sorted((r["acc"] for r in rows), reverse=True)


def test_the_front_holds_exactly_the_rows_no_other_beats_on_both():
    rows = [{"encoding": n, "acc": a, "native": r} for n, a, r in
            [("x", 75, 0.7), ("y", 72, 0.95), ("z", 71, 0.9), ("w", 70, 0.97), ("v", 75, 0.6)]]  # fmt: skip
    assert leaderboard.pareto(rows) == {"x", "y", "w"}
