"""The one Markdown-table helper (reports, extrapolation tables, benchmarks); no extra
dependency (pandas' ``to_markdown`` needs tabulate)."""

from __future__ import annotations


def markdown_table(header: list[str], rows: list[list], pad: bool = False) -> str:
    """A GitHub Markdown table; cells are printed with ``str``. ``pad``: columns padded to one
    width, for reading in a terminal (benchmarks print their tables)."""
    cells = [[str(c) for c in header], *([str(c) for c in row] for row in rows)]
    widths = [max(len(r[i]) for r in cells) if pad else 0 for i in range(len(header))]
    rule = "|" + "|".join("-" * (w + 2) if pad else "---" for w in widths) + "|"
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in cells]
    return "\n".join([lines[0], rule, *lines[1:]])


def frame_to_markdown(frame, cell=str) -> str:
    """A pandas DataFrame (index levels become the first columns) as Markdown."""
    names = [n or "" for n in frame.index.names]
    rows = []
    for key, values in zip(frame.index, frame.itertuples(index=False)):
        key = key if isinstance(key, tuple) else (key,)
        rows.append([*key, *(cell(v) for v in values)])
    return markdown_table(names + [str(c) for c in frame.columns], rows)
