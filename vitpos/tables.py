"""The Markdown tables of ``vitpos``: the one table helper, and the two tables of one run's
numbers that training logs to TensorBoard's TEXT tab.

It imports only :mod:`vitpos.metrics` and :mod:`vitpos.sizes` (below them, only :mod:`vitpos.errors`),
so every layer may use it: the reports of ``vitpos.compare``, the tables of ``vitpos.extrapolate``,
``vitpos.train`` and the benchmarks. No extra dependency (pandas' ``to_markdown`` needs tabulate).
"""

from __future__ import annotations

import math

from vitpos.metrics import parse_metric
from vitpos.sizes import column_order

#: a run's final numbers, in the order TensorBoard's TEXT table ``test/final`` lists them
FINAL_SCORES = (
    "test/acc", "test/acc_raw", "test/acc_flip", "test/loss", "val/acc_best", "time/fit_min", "time/eval_min"
)  # fmt: skip


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


def sweep_markdown(results: dict[str, float], default: str) -> str:
    """One run's accuracies beyond its training size (``test/acc@...`` of ``evaluate_sizes``) as a
    Markdown table in %: a row per strategy (``default``: the encoding's own), a column per size,
    upsampled sizes marked, a non-square size (``16x32``) a column of its own after the squares
    (:func:`vitpos.sizes.column_order`, the order of ``python -m vitpos.extrapolate``'s table).
    Train logs it to TensorBoard's TEXT tab instead of one single-point chart per size and strategy."""
    cells: dict[tuple[str, str], float] = {}
    columns: dict[tuple[tuple, str], str] = {}
    for name, value in results.items():
        m = parse_metric(name)
        if m is None or m.stat != "acc":
            continue
        column = f"{m.size}{' (upsampled)' if m.upsampled else ''}"
        columns[(column_order(m.size), column)] = column
        cells[(m.strategy or default, column)] = value
    order = [c for _, c in sorted(columns)]
    strategies = [default, *sorted({s for s, _ in cells} - {default})]
    rows = [[s, *(f"{100 * cells[(s, c)]:.1f}" if (s, c) in cells else "" for c in order)] for s in strategies]
    return markdown_table(["strategy", *order], [r for r in rows if any(r[1:])])


def final_scores_markdown(metrics: dict[str, float]) -> str:
    """One run's final numbers (those of ``FINAL_SCORES`` it has) as a two-column Markdown table:
    accuracies in %, the loss as is, times in minutes. Train logs it to TensorBoard's TEXT tab, so
    SCALARS holds only curves (a single-point chart per final number would come before them)."""

    def cell(name: str, value: float) -> str:
        if name.startswith("time/"):
            return f"{value:.1f} min"
        return f"{value:.4f}" if name.endswith("loss") else f"{100 * value:.2f}%"

    rows = [[f"`{k}`", cell(k, metrics[k])] for k in FINAL_SCORES if k in metrics and not math.isnan(metrics[k])]
    return markdown_table(["metric", "value"], rows)
