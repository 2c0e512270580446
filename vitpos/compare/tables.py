"""Markdown tables without extra dependencies (pandas' ``to_markdown`` needs tabulate)."""

from __future__ import annotations


def markdown_table(header: list[str], rows: list[list]) -> str:
    """A GitHub Markdown table; cells are printed with ``str``."""
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(lines)


def frame_to_markdown(frame, cell=str) -> str:
    """A pandas DataFrame (index levels become the first columns) as Markdown."""
    names = [n or "" for n in frame.index.names]
    rows = []
    for key, values in zip(frame.index, frame.itertuples(index=False)):
        key = key if isinstance(key, tuple) else (key,)
        rows.append([*key, *(cell(v) for v in values)])
    return markdown_table(names + [str(c) for c in frame.columns], rows)
