"""docs/leaderboard.md and docs/leaderboard.png: accuracy, resolution robustness and cost of every
image encoding on one page, made from the committed reports by ``python scripts/rebuild_reports.py``.

- test/acc, its 95% interval and group: the full comparison (``docs/results/cifar10_full``);
  encodings that share a letter are not distinguishable (vitpos/compare/stats.py);
- native retention: acc@32 (each encoding's default strategy) / acc@16 of the model trained at
  16 px in ``docs/results/extrapolation_native``: how much of its accuracy survives twice the
  training resolution (1.0 = all of it; the images are the same, seen at their native 32 px),
  with a 95% interval from its seeds' ratios (scripts/leaderboard_front.py);
- the Pareto front of the two: how often each encoding is on it over parametric draws of both
  axes; only those on it in at least 90% of the draws are marked;
- aspect retention: the mean of acc@16x32 and acc@32x16 / acc@16 of ``extrapolation_aspect``;
- position parameters: the full comparison's parameters minus those of ``none``;
- step time: one training step relative to ``rope_2d``, measured by ``python -m bench.step_cost
  write=true`` in one process (``docs/results/step_cost.csv``, which names its machine); "not
  measured" for an encoding the file has no row for.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from vitpos.compare.stats import METHOD, Group, pooled, shares_group  # noqa: E402
from vitpos.metrics import metric_name  # noqa: E402
from vitpos.tables import markdown_table  # noqa: E402

from .leaderboard_front import ROBUST, front_frequency, half_width, native_seed_ratios, pooled_spread  # noqa: E402
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
    ratios = native_seed_ratios(results / SOURCES["native"])
    native_spread = pooled_spread(ratios)
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
            "native_seeds": len(ratios.get(name, [])),
            "native_half": half_width(*native_spread, len(ratios.get(name, []))),
            "aspect": sum(wide) / 2 / _at(asp, 16),
            "params": _number(row, "params_mean") - base_params,
            "step": _number(cost.get(name, {}), "x_rope_2d"),
        })  # fmt: skip
    acc_spread = pooled([Group(r["encoding"], r["acc"], r["std"] if r["seeds"] > 1 else math.nan, r["seeds"])
                         for r in out])  # fmt: skip
    shares = front_frequency(out, acc_spread, native_spread)
    for r in out:
        r["front"] = shares[r["encoding"]]
    return sorted(out, key=lambda r: (-r["acc"], r["encoding"]))


def pareto(rows: list[dict]) -> set[str]:
    """Encodings no other beats on both test/acc and native retention."""

    def beats(o: dict, r: dict) -> bool:
        return (
            o["acc"] >= r["acc"] and o["native"] >= r["native"] and (o["acc"], o["native"]) != (r["acc"], r["native"])
        )

    return {r["encoding"] for r in rows if not any(beats(o, r) for o in rows)}


def _cell(value: float, fmt: str, missing: str = "") -> str:
    return missing if math.isnan(value) else format(value, fmt)


def robust(rows: list[dict]) -> set[str]:
    """Encodings on the front in at least :data:`ROBUST` of the parametric draws."""
    return {r["encoding"] for r in rows if r["front"] >= ROBUST}


def markdown(rows: list[dict]) -> str:
    marked = robust(rows)
    table = [
        [f"`{r['encoding']}`" + (" ◆" if r["encoding"] in marked else ""),
         f"{r['acc']:.1f} ± {r['std']:.1f} ({r['seeds']})" if r["seeds"] > 1 else f"{r['acc']:.1f} (1 seed)",
         f"{r['low']:.1f}–{r['high']:.1f}" if not math.isnan(r["low"]) else "one seed",
         r["group"],
         _cell(r["native"], ".2f") + (f" ± {r['native_half']:.2f} ({r['native_seeds']})"
                                      if not math.isnan(r["native_half"]) else ""),
         f"{100 * r['front']:.0f}%", _cell(r["aspect"], ".2f"),
         _cell(r["params"], ",.0f"), _cell(r["step"], ".2f", "not measured")]
        for r in rows
    ]  # fmt: skip
    header = ["encoding", "test acc (%)", "95% interval", "group", "native retention (95% interval, seeds)",
              "on the front", "aspect retention", "position params", "step time × rope_2d"]  # fmt: skip
    return markdown_table(header, table)


def axes(results: Path = RESULTS) -> dict[str, str]:
    """What each axis of the picture comes from: {"y": ..., "x": ...}, the model and the
    protocol (the report's section budget) of its report."""
    full = read_csv(results / SOURCES["full"] / "report.csv")[0]
    native = next(iter(native_rows(results).values()))
    return {
        "y": f"y: test accuracy, `{SOURCES['full']}` (model `{full['model']}`: {full['budget']}; all 10,000 test "
        "images)",
        "x": f"x: native retention, `{SOURCES['native']}` (model `{native['model']}`: {native['budget']}; a fixed "
        "1,000 test images)",
    }


#: where a label may sit beside its point, in points, in the order tried
CANDIDATES = sorted(
    ((dx, dy) for dy in range(-64, 65, 8) for dx in (5, -5, 30, -30)),
    key=lambda c: (abs(c[1]) + abs(c[0]), c[1] < 0, c[0] < 0),
)  # nearest first


def _obstacles(ax, rows: list[dict]) -> list[tuple[float, float, float, float, int]]:
    """Pixel boxes a label should not cover, with the cost of covering each: every marker (5)
    and every error bar (a thin box, 1)."""
    out = []
    for r in rows:
        x, y = ax.transData.transform((r["native"], r["acc"]))
        out.append((x - 5, y - 5, x + 5, y + 5, 5))
        half = 0.0 if math.isnan(r.get("native_half", math.nan)) else r["native_half"]
        left, _ = ax.transData.transform((r["native"] - half, r["acc"]))
        right, _ = ax.transData.transform((r["native"] + half, r["acc"]))
        out.append((left, y - 2, right, y + 2, 1))
        if not math.isnan(r["low"]):
            _, bottom = ax.transData.transform((r["native"], r["low"]))
            _, top = ax.transData.transform((r["native"], r["high"]))
            out.append((x - 2, bottom, x + 2, top, 1))
    return out


def place_labels(ax, rows: list[dict], fontsize: float = 8) -> None:
    """Label every point at the nearest place of :data:`CANDIDATES` whose text covers no label
    placed before it, no marker, no error bar and stays inside the axes (else the place that
    covers least: another label costs 50, a marker 5, a bar 1); a label set off from its point
    gets a thin leader line."""
    ax.autoscale_view()
    scale = ax.figure.dpi / 72  # pixels per point
    frame = ax.get_window_extent()
    taken = _obstacles(ax, rows)

    def box(x, y, dx, dy, text):
        width, height = 0.62 * fontsize * len(text) * scale, fontsize * 1.25 * scale
        left = x + dx * scale if dx > 0 else x + dx * scale - width
        bottom = y + dy * scale - height / 2
        return left, bottom, left + width, bottom + height

    def cost(b) -> int:
        hits = sum(o[4] for o in taken if b[0] < o[2] and o[0] < b[2] and b[1] < o[3] and o[1] < b[3])
        outside = b[0] < frame.x0 or b[2] > frame.x1 or b[1] < frame.y0 or b[3] > frame.y1
        return hits + 1000 * outside

    for r in rows:
        x, y = ax.transData.transform((r["native"], r["acc"]))
        dx, dy = min(CANDIDATES, key=lambda c: (cost(box(x, y, *c, r["encoding"])), CANDIDATES.index(c)))
        taken.append((*box(x, y, dx, dy, r["encoding"]), 50))
        lead = {"arrowprops": {"arrowstyle": "-", "lw": 0.5, "color": "0.5"}} if abs(dy) > 12 or abs(dx) > 5 else {}
        ax.annotate(r["encoding"], (r["native"], r["acc"]), xytext=(dx, dy), textcoords="offset points",
                    fontsize=fontsize, va="center", ha="left" if dx > 0 else "right", **lead)  # fmt: skip


def picture(rows: list[dict], path: Path, caption: dict[str, str]) -> None:
    """test/acc against native retention, each with its 95% interval (pooled seed spread, t),
    every point labelled, the robust front members marked, the axes' sources in a caption."""
    marked = robust(rows)
    fig, ax = plt.subplots(figsize=(10, 7.6), dpi=120)
    for r in rows:
        err = [[r["acc"] - r["low"]], [r["high"] - r["acc"]]] if not math.isnan(r["low"]) else None
        xerr = None if math.isnan(r["native_half"]) else r["native_half"]
        on = r["encoding"] in marked
        ax.errorbar(r["native"], r["acc"], yerr=err, xerr=xerr, fmt="D" if on else "o", ms=7 if on else 5, capsize=2,
                    elinewidth=0.8, color="tab:red" if on else "tab:blue", alpha=0.85)  # fmt: skip
    halves = [0.0 if math.isnan(r["native_half"]) else r["native_half"] for r in rows]
    low = min(r["native"] - h for r, h in zip(rows, halves))
    high = max(r["native"] + h for r, h in zip(rows, halves))
    ax.set_xlim(low - 0.02, high + 0.09)  # the bars, and room for a label on the right
    place_labels(ax, rows)
    interval = "95% intervals: mean ± t × pooled seed std / √seeds, each axis"
    ax.errorbar([], [], yerr=[], xerr=[], fmt="o", color="tab:blue", capsize=2, label=f"encoding; {interval}")
    ax.errorbar([], [], yerr=[], fmt="D", color="tab:red", ms=7,
                label=f"on the Pareto front in ≥{ROBUST:.0%} of parametric draws of both axes")  # fmt: skip
    ax.set_xlabel("native retention: acc@32 / acc@16 of a model trained at 16 px")
    ax.set_ylabel("CIFAR-10 test accuracy (%), full comparison")
    ax.set_title("Image position encodings: accuracy against resolution robustness")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    text = "\n".join(caption[k].replace("`", "") for k in ("y", "x"))
    fig.text(0.01, 0.01, text, fontsize=7, va="bottom", ha="left", wrap=True)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def resolved_sentence(rows: list[dict]) -> str:
    """Which encodings the all-pairs letters cannot tell from the best (secondary)."""
    tied = [r["encoding"] for r in rows[1:] if shares_group(r["group"], rows[0]["group"])]
    best = f"`{rows[0]['encoding']}`"
    if not tied:
        return f"No other encoding is distinguishable from the best test accuracy ({best}) at 95%"
    return (f"{len(tied)} other encoding{'s are' if len(tied) > 1 else ' is'} not distinguishable from the best test "
            f"accuracy ({best}) at 95%: {', '.join(f'`{t}`' for t in tied)}")  # fmt: skip


def page(rows: list[dict], caption: dict[str, str]) -> str:
    cost_file = RESULTS / "step_cost.csv"
    machine = read_csv(cost_file)[0]["machine"] if cost_file.exists() else "not measured"
    unmeasured = [f"`{r['encoding']}`" for r in rows if math.isnan(r["step"])]
    missing = f" Not measured: {', '.join(unmeasured)} (the file has no row for them)." if unmeasured else ""
    seeds = sorted({r["seeds"] for r in rows})
    native_seeds = sorted({r["native_seeds"] for r in rows})
    return "\n".join([
        "# Leaderboard: image position encodings",
        "",
        "Generated by `python scripts/rebuild_reports.py` from the committed reports; do not edit.",
        "",
        "![accuracy against native retention](leaderboard.png)",
        "",
        f"The two axes come from different models and protocols. {caption['y']}. {caption['x']}.",
        "",
        markdown(rows),
        "",
        f"**What the seeds resolve (all pairs: secondary).** {resolved_sentence(rows)}. Encodings sharing a letter "
        f"in **group** are not distinguishable from each other. Method: {METHOD} "
        f"({'/'.join(map(str, seeds))} seeds per encoding). The declared primary analysis of the full comparison "
        "is in its report (`docs/results/cifar10_full/report.md`, `docs/preregistration.md`).",
        "",
        "- **test acc**: mean ± std over seeds, and its 95% interval (the seed spread pooled over the encodings).",
        "- **native retention**: acc@32 / acc@16 of the means (each encoding's default strategy), ± the half-width "
        "of its 95% interval: each seed's ratio, the spread pooled over the encodings, Student's t "
        f"({'/'.join(map(str, native_seeds))} seeds per encoding).",
        "- **on the front**: the share of 20,000 joint parametric draws (each axis: mean + pooled standard error × "
        "a t draw on the pool's degrees of freedom; too few seeds to resample) in which no other encoding beats "
        f"it on both test accuracy and native retention; ◆ (red in the picture): at least {ROBUST:.0%}.",
        "- **aspect retention**: the mean of acc@16x32 and acc@32x16 / acc@16 of `docs/results/extrapolation_aspect`.",
        "- **position params**: the full comparison's parameters minus those of `none`.",
        f"- **step time × rope_2d**: one training step of the comparison's model, interleaved in one process "
        f"(`python -m bench.step_cost write=true`): {machine}.{missing}",
        "",
    ])  # fmt: skip


def write(results: Path = RESULTS, into: Path | None = None) -> Path:
    """Write ``leaderboard.md`` and ``leaderboard.png`` to ``into`` (default: docs/); returns the page."""
    into = into or results.parent
    rows, caption = leaderboard_rows(results), axes(results)
    picture(rows, into / "leaderboard.png", caption)
    out = into / "leaderboard.md"
    out.write_text(page(rows, caption))
    return out
