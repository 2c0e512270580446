"""Prose that cannot go stale: in the parts of the results pages that describe the full
comparison as it stands, counts, seed numbers and per-encoding numbers come from generated blocks
(scripts/doc_pages.py), never from hand-written text that the next seed would make wrong.

Outside the generated blocks and code fences of :data:`SCOPE`, a sentence fails when it names a
registered encoding beside a number with a decimal point, or puts "runs" / "seeds" next to a
count (``38 runs``, ``two seeds``, ``seeds 0 and 1``); :data:`ALLOWED` lists the few phrases that
are fixed by declaration, not by data. tests/test_doc_tables.py checks that every generated block
is exactly what its report makes; this file checks, number by number, the run count block.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scripts.doc_pages import blocks, generate
from scripts.report_rows import read_csv
from vitpos.encodings import list_encodings

ROOT = Path(__file__).resolve().parents[1]

#: page -> (first heading of the checked part, the heading that ends it, or None for the end of the page)
SCOPE = {
    "docs/results.md": ("## Full data, the bf16 recipe", "## Full data, the 11-epoch recipe on AVX2 cores"),
    "docs/recipe.md": ("## How the recipe was chosen", "### On AVX2-only cores: the 11-epoch recipe"),
    "docs/results/cifar10_full/README.md": ("# Full-data CIFAR-10 comparison", "**The first ten encodings"),
}
#: phrases fixed by declaration (the pre-registered seeds), not by the data
ALLOWED = ("seeds 1-3",)
COUNT = r"(?:\d[\d,]*|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
RUNS_OR_SEEDS = re.compile(rf"\b{COUNT}\s+(?:\w+\s+)?(?:runs|seeds)\b|\b(?:runs|seeds)\s+\d", re.I)
DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+")


def checked_text(page: str) -> str:
    """The scoped part of ``page`` with its generated blocks and code fences cut out."""
    text = (ROOT / page).read_text()
    first, last = SCOPE[page]
    assert first in text, f"{page}: the heading {first!r} that starts the checked part is gone"
    part = text[text.index(first) :]
    if last is not None:
        assert last in part, f"{page}: the heading {last!r} that ends the checked part is gone"
        part = part[: part.index(last)]
    part = re.sub(r"<!-- generated: (\S+) .*?<!-- end generated: \1 -->", " ", part, flags=re.S)
    return re.sub(r"```.*?```", " ", part, flags=re.S)


def sentences(text: str) -> list[str]:
    """Sentences of prose: split after ". ", ": " or ";" at a line's content, with the lines
    of a paragraph joined."""
    flat = re.sub(r"\s+", " ", text)
    return [s for s in re.split(r"(?<=[.;:])\s+(?=[A-Z`*(-])", flat) if s.strip()]


def stale(sentence: str, names: set[str]) -> str | None:
    """Why ``sentence`` would go stale, or None."""
    for allowed in ALLOWED:
        sentence = sentence.replace(allowed, "")
    named = [n for n in names if re.search(rf"`{re.escape(n)}`", sentence)]
    if named and DECIMAL.search(sentence):
        return f"names {named[0]} beside the number {DECIMAL.search(sentence).group()}"
    found = RUNS_OR_SEEDS.search(sentence)
    return f"counts runs or seeds ({found.group()!r})" if found else None


@pytest.mark.parametrize("page", sorted(SCOPE))
def test_no_hand_written_count_or_per_encoding_number(page):
    names = set(list_encodings())
    bad = [f"{why}: {s[:160]}" for s in sentences(checked_text(page)) if (why := stale(s, names))]
    assert not bad, f"{page}: move these into a generated block or drop them:\n" + "\n".join(bad)


def test_the_check_catches_what_it_is_for():
    names = {"cpe", "rope_2d"}
    assert stale("`cpe` reaches 75.3 ± 0.3%.", names)
    assert stale("python train.py runs 38 runs.", names) and stale("over two seeds, the order holds", names)
    assert stale("Seeds 0 and 1 ran first.", names) and stale("runs 2 and 3", names)
    assert stale("seed 0 of `cpe` is the run that chose the recipe", names) is None  # one run, named: not a count
    assert stale("`cpe` is resolved from `rope_2d` in the primary analysis over seeds 1-3.", names) is None
    assert stale("width 96 and 3 heads, 0.31M parameters", names) is None  # no encoding named


def test_the_run_count_block_is_what_runs_csv_holds():
    runs = read_csv(ROOT / "docs/results/cifar10_full/runs.csv")
    body = dict(blocks((ROOT / "docs/results.md").read_text()))["cifar10_full/runs"]
    assert body.strip() == generate("cifar10_full/runs")
    complete = [r for r in runs if r["status"] == "complete"]
    assert f"**{len(complete)} complete runs**" in body
    labels = {r["label"].rsplit("-", 1)[0] for r in complete}
    assert f"of each of its {len(labels)} encodings" in body or all(f"`{n}`" in body for n in labels)
    for seed in {r["seed"] for r in complete}:
        assert re.search(rf"\b{int(float(seed))}\b", body)
