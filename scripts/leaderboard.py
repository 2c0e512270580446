"""docs/leaderboard.md and docs/leaderboard.png: accuracy, resolution robustness and cost of every
image encoding on one page, made from the committed reports by ``python scripts/rebuild_reports.py``.

- test/acc, its 95% interval and group: the full comparison (``docs/results/cifar10_full``);
  encodings that share a letter are not distinguishable (vitpos/compare/stats.py);
- native retention: acc@32 (each encoding's default strategy) / acc@16 of the model trained at
  16 px in ``docs/results/extrapolation_native``: how much of its accuracy survives twice the
  training resolution (1.0 = all of it; the images are the same, seen at their native 32 px);
- aspect retention: the mean of acc@16x32 and acc@32x16 / acc@16 of ``extrapolation_aspect``;
- position parameters: the full comparison's parameters minus those of ``none``;
- step time: one training step relative to ``rope_2d``, measured by ``python -m bench.step_cost
  write=true`` in one process (``docs/results/step_cost.csv``, which names its machine).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from vitpos.compare.stats import METHOD, shares_group  # noqa: E402
from vitpos.metrics import metric_name  # noqa: E402
from vitpos.tables import markdown_table  # noqa: E402

from .report_rows import RESULTS, encoding_of, read_csv  # noqa: E402

SOURCES = {"full": "cifar10_full", "native": "extrapolation_native", "aspect": "extrapolation_aspect"}


def _number(row: dict, column: str) -> float:
    value = row.get(column)
    return float(value) if value not in (None, "") else math.nan


def _at(row: dict, size: int | str) -> float:
    """The mean accuracy of a report row at the image ``size`` (``32``, ``"16x32"``), default strategy."""
    return _number(row, metric_name("res", size) + "_mean")


def _by_encoding(rows: list[dict]) -> dict[str, dict]:
    return {encoding_of(r["label"]): r for r in rows}


def native_rows(results: Path) -> dict[str, dict]:
    """The native protocol's single-resolution section (trained at 16 px), by encoding."""
    rows = read_csv(results / SOURCES["native"] / "report.csv")
    return _by_encoding([r for r in rows if "trained at 16 px" in r["budget"]])


def leaderboard_rows(results: Path = RESULTS) -> list[dict]:
    """One record per encoding of the full comparison, best test/acc first."""
    full = _by_encoding(read_csv(results / SOURCES["full"] / "report.csv"))
    native, aspect = native_rows(results), _by_encoding(read_csv(results / SOURCES["aspect"] / "report.csv"))
    cost_file = RESULTS / "step_cost.csv"  # measured, not rebuilt: always the committed one
    cost = {r["encoding"]: r for r in read_csv(cost_file)} if cost_file.exists() else {}
    base_params = _number(full.get("none", {}), "params_mean")
    out = []
    for name, row in full.items():
        nat, asp = native.get(name, {}), aspect.get(name, {})
        wide = [_at(asp, s) for s in ("16x32", "32x16")]
        out.append({
            "encoding": name,
            "acc": 100 * _number(row, "test/acc_mean"),
            "std": 100 * _number(row, "test/acc_std"),
            "seeds": int(row["seeds"]),
            "low": 100 * _number(row, "test/acc_ci_low"),
            "high": 100 * _number(row, "test/acc_ci_high"),
            "group": row.get("test/acc_group") or "",
            "native": _at(nat, 32) / _at(nat, 16),
            "aspect": sum(wide) / 2 / _at(asp, 16),
            "params": _number(row, "params_mean") - base_params,
            "step": _number(cost.get(name, {}), "x_rope_2d"),
        })  # fmt: skip
    return sorted(out, key=lambda r: (-r["acc"], r["encoding"]))


def pareto(rows: list[dict]) -> set[str]:
    """Encodings no other beats on both test/acc and native retention."""

    def beats(o: dict, r: dict) -> bool:
        return (
            o["acc"] >= r["acc"] and o["native"] >= r["native"] and (o["acc"], o["native"]) != (r["acc"], r["native"])
        )

    return {r["encoding"] for r in rows if not any(beats(o, r) for o in rows)}


def _cell(value: float, fmt: str) -> str:
    return "" if math.isnan(value) else format(value, fmt)


def markdown(rows: list[dict]) -> str:
    front = pareto(rows)
    table = [
        [f"`{r['encoding']}`" + (" ◆" if r["encoding"] in front else ""),
         f"{r['acc']:.1f} ± {r['std']:.1f} ({r['seeds']})" if r["seeds"] > 1 else f"{r['acc']:.1f} (1 seed)",
         f"{r['low']:.1f}–{r['high']:.1f}" if not math.isnan(r["low"]) else "one seed",
         r["group"], _cell(r["native"], ".2f"), _cell(r["aspect"], ".2f"),
         _cell(r["params"], ",.0f"), _cell(r["step"], ".2f")]
        for r in rows
    ]  # fmt: skip
    header = ["encoding", "test acc (%)", "95% interval", "group", "native retention", "aspect retention",
              "position params", "step time × rope_2d"]  # fmt: skip
    return markdown_table(header, table)


#: where a label may sit beside its point, in points, in the order tried
CANDIDATES = [(6, 0), (6, -9), (6, 9), (-6, 0), (-6, -9), (-6, 9), (6, -18), (6, 18), (-6, -18), (-6, 18),
              (6, -27), (-6, -27), (6, 27), (-6, 27)]  # fmt: skip


def place_labels(ax, rows: list[dict], fontsize: float = 8) -> None:
    """Label every point where its text overlaps no label placed before it and no other point:
    the first free place of :data:`CANDIDATES` (a label that fits nowhere takes the first)."""
    ax.autoscale_view()
    scale = ax.figure.dpi / 72  # pixels per point
    points = [ax.transData.transform((r["native"], r["acc"])) for r in rows]
    boxes: list[tuple[float, float, float, float]] = []

    def box(x, y, dx, dy, text):
        width, height = 0.6 * fontsize * len(text) * scale, fontsize * 1.2 * scale
        left = x + dx * scale if dx > 0 else x + dx * scale - width
        bottom = y + dy * scale - height / 2
        return left, bottom, left + width, bottom + height

    def free(b, own):
        hits_box = any(b[0] < o[2] and o[0] < b[2] and b[1] < o[3] and o[1] < b[3] for o in boxes)
        hits_point = any(b[0] - 4 < px < b[2] + 4 and b[1] - 4 < py < b[3] + 4
                         for i, (px, py) in enumerate(points) if i != own)  # fmt: skip
        return not hits_box and not hits_point

    for i, (r, (x, y)) in enumerate(zip(rows, points)):
        dx, dy = next((c for c in CANDIDATES if free(box(x, y, *c, r["encoding"]), i)), CANDIDATES[0])
        boxes.append(box(x, y, dx, dy, r["encoding"]))
        ax.annotate(r["encoding"], (r["native"], r["acc"]), xytext=(dx, dy), textcoords="offset points",
                    fontsize=fontsize, va="center", ha="left" if dx > 0 else "right")  # fmt: skip


def picture(rows: list[dict], path: Path) -> None:
    """test/acc (95% interval) against native retention, every point labelled, the front marked."""
    front = pareto(rows)
    fig, ax = plt.subplots(figsize=(10, 7), dpi=120)
    for r in rows:
        err = [[r["acc"] - r["low"]], [r["high"] - r["acc"]]] if not math.isnan(r["low"]) else None
        on = r["encoding"] in front
        ax.errorbar(r["native"], r["acc"], yerr=err, fmt="D" if on else "o", ms=7 if on else 5, capsize=3,
                    color="tab:red" if on else "tab:blue", alpha=0.9)  # fmt: skip
    xs = [r["native"] for r in rows]
    ax.set_xlim(min(xs) - 0.05, max(xs) + 0.05)  # room for a label on either side
    place_labels(ax, rows)
    line = sorted((r["native"], r["acc"]) for r in rows if r["encoding"] in front)
    ax.plot(*zip(*line), color="tab:red", lw=1, ls="--", label="Pareto front (no encoding better on both)")
    ax.errorbar([], [], yerr=[], fmt="o", color="tab:blue", capsize=3, label="encoding, 95% interval over seeds")
    ax.set_xlabel("native retention: acc@32 / acc@16 of a model trained at 16 px")
    ax.set_ylabel("CIFAR-10 test accuracy (%), full comparison")
    ax.set_title("Image position encodings: accuracy against resolution robustness")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def page(rows: list[dict]) -> str:
    cost_file = RESULTS / "step_cost.csv"
    machine = read_csv(cost_file)[0]["machine"] if cost_file.exists() else "not measured"
    seeds = sorted({r["seeds"] for r in rows})
    tied = [r["encoding"] for r in rows if shares_group(r["group"], rows[0]["group"])]
    return "\n".join([
        "# Leaderboard: image position encodings",
        "",
        "Generated by `python scripts/rebuild_reports.py` from the committed reports; do not edit.",
        "",
        "![accuracy against native retention](leaderboard.png)",
        "",
        markdown(rows),
        "",
        f"**What the seeds resolve.** {len(tied)} encodings are not distinguishable from the best test accuracy at "
        f"95%: {', '.join(f'`{t}`' for t in tied)}. Encodings sharing a letter in **group** are not distinguishable "
        f"from each other. Method: {METHOD} ({'/'.join(map(str, seeds))} seeds per encoding).",
        "",
        "- **test acc**: `docs/results/cifar10_full` (all 45,000 training images, all 10,000 test images, 20 "
        "epochs at 16-32 px, bf16 on AVX512-BF16 CPUs), mean ± std over seeds.",
        "- **native retention**: acc@32 / acc@16 of `docs/results/extrapolation_native` (trained at 16 px, each "
        "encoding's default strategy, a fixed 1,000 test images).",
        "- **aspect retention**: the mean of acc@16x32 and acc@32x16 / acc@16 of `docs/results/extrapolation_aspect`.",
        "- **position params**: the full comparison's parameters minus those of `none`.",
        f"- **step time × rope_2d**: one training step of the comparison's model, interleaved in one process "
        f"(`python -m bench.step_cost write=true`): {machine}.",
        "- ◆ on the Pareto front of test accuracy and native retention (red in the picture).",
        "",
    ])  # fmt: skip


def write(results: Path = RESULTS, into: Path | None = None) -> Path:
    """Write ``leaderboard.md`` and ``leaderboard.png`` to ``into`` (default: docs/); returns the page."""
    into = into or results.parent
    rows = leaderboard_rows(results)
    picture(rows, into / "leaderboard.png")
    out = into / "leaderboard.md"
    out.write_text(page(rows))
    return out
