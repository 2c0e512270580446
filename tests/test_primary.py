"""The report's seed analysis (vitpos/compare/primary.py): the declared primary analysis is pending
until its seeds exist and computed as soon as they do, it matches the page that declares it, and
a section it does not cover gets only what its seeds resolve."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from vitpos.compare.primary import PRIMARY, reading_lines

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["rope_2d", "none", *(f"enc{i}" for i in range(19))]


def scores_at(seeds, shift=None, seed=0):
    """{label: {seed: accuracy}} of 21 encodings with a shared seed effect and small noise."""
    rng = np.random.default_rng(seed)
    block = dict(zip(seeds, rng.normal(0, 0.01, len(seeds))))
    base = dict(zip(NAMES, np.linspace(0.64, 0.72, len(NAMES))))
    base.update(shift or {})
    return {f"{n}-abc123": {s: float(base[n] + block[s] + rng.normal(0, 0.004)) for s in seeds} for n in NAMES}


def names_of(scores):
    return {label: label.split("-")[0] for label in scores}


def test_the_declared_values_are_the_pages():
    page = (ROOT / PRIMARY.page).read_text()
    assert "**Seeds 1, 2 and 3 of every encoding.**" in page and PRIMARY.seeds == (1, 2, 3)
    assert "(39 for the\n21 encodings" in page and "**α = 0.05.**" in page and PRIMARY.alpha == 0.05
    question = page.split("## The question")[1].split("##")[0]
    assert PRIMARY.references == ("rope_2d", "none") and "`rope_2d`" in question and "`none`" in question
    assert re.search(r"\[preregistration.md\]\(preregistration.md\)", (ROOT / "docs/results.md").read_text())


def test_the_primary_is_pending_without_seed_3_and_shows_the_seeds_present_as_not_primary():
    scores = scores_at((0, 1, 2))
    text = "\n".join(reading_lines(scores, names_of(scores), PRIMARY.task, PRIMARY.model))
    assert "**Pending**" in text and "seed 3 is missing for 21 of 21 encodings" in text
    assert "#### The same family over seeds 0, 1, 2: not the primary analysis" in text
    assert "39 contrasts" in text and "#### Sensitivity (never chooses)" in text
    assert "primary: two-way" not in text  # no sensitivity row pretends to be the primary
    assert "Seed block (seeds 0, 1, 2): F(2, 40)" in text


def test_the_primary_is_computed_as_soon_as_seeds_1_to_3_exist():
    scores = scores_at((0, 1, 2, 3), shift={"enc5": 0.80})
    text = "\n".join(reading_lines(scores, names_of(scores), PRIMARY.task, PRIMARY.model))
    assert "Pending" not in text and "not the primary analysis" not in text
    assert "| primary: two-way, seeds 1, 2, 3 |" in text and "| two-way, seeds 0, 1, 2, 3 |" in text
    primary_row = next(line for line in text.splitlines() if line.startswith("| primary: two-way"))
    assert primary_row.split("|")[5].strip() == "0"  # the primary differs from itself in no verdict
    row = next(line for line in text.splitlines() if line.startswith("| `enc5` |"))
    assert row.count("**") == 4  # resolved against both references
    assert "Resolving power at 3 seeds" in text  # the primary's own seeds: 1, 2, 3
    # seed 0 is left out: changing it does not move the primary table
    moved = {label: {**seeds, 0: seeds[0] + 0.05} for label, seeds in scores.items()}
    moved["enc5-abc123"][0] -= 0.3
    again = "\n".join(reading_lines(moved, names_of(moved), PRIMARY.task, PRIMARY.model))
    assert again.split("Seed block")[0] == text.split("Seed block")[0]


def test_another_section_gets_its_resolving_power_only():
    scores = scores_at((0, 1))
    text = "\n".join(reading_lines(scores, names_of(scores), "compare_cifar_full_e11", PRIMARY.model))
    assert text.startswith("#### What the seeds resolve") and "Primary" not in text
    assert "for one planned pair" in text and "for all pairs (Tukey)" in text and "primary family" not in text
    assert reading_lines(scores_at((0,)), names_of(scores_at((0,))), "x", "m") == []  # one seed: nothing to say


def test_a_zero_spread_section_says_it_resolves_nothing():
    scores = {f"e{i}-abc123": {0: 1.0, 1: 1.0} for i in range(4)}
    text = "\n".join(reading_lines(scores, names_of(scores), "quick", "m"))
    assert "Resolving power: none: the seed spread is zero" in text
