"""The documentation says what the code does and what was measured, when and on what machine;
how it came to be so (what it "used to" do, how things were "before this change") belongs in
commit messages. A page that tells history fails here, naming the page, the line and the phrase."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))
#: phrases that narrate a change instead of describing the product
PHRASES = ("used to", "before this change", "since then", "once hid", "no longer", "what was changed",
           "before the move", "after the move")  # fmt: skip
#: any of them, a line break or spaces allowed between their words
HISTORY = re.compile(r"\b(" + "|".join(r"\s+".join(p.split()) for p in PHRASES) + r")\b", re.I)


def history(text: str) -> list[str]:
    """``line N: phrase`` for every phrase of :data:`PHRASES` in ``text``."""
    return [
        f"line {text[: m.start()].count(chr(10)) + 1}: {' '.join(m.group(0).split())!r}" for m in HISTORY.finditer(text)
    ]


def test_the_phrases_are_caught_across_a_line_break():
    assert history("It used\nto be slow.") == ["line 1: 'used to'"]
    assert history("Made\nbefore this\n   change.") == ["line 2: 'before this change'"]
    assert history("Fast since then.") and not history("The tool is used by every run.")


def test_there_are_pages_to_check():
    assert "docs/performance.md" in PAGES and "docs/running.md" in PAGES and "docs/compare.md" in PAGES


@pytest.mark.parametrize("page", PAGES)
def test_a_page_describes_the_product_not_its_history(page):
    found = history((ROOT / page).read_text())
    assert not found, f"{page} tells history ({'; '.join(found)}): say what the code does and what was measured"
