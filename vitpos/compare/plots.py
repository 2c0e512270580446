"""The plots of ``vitpos.compare``: val/acc curves and accuracy vs resolution / length.

One panel per section of the report, i.e. per (task, model, budget): the budget
names the protocol (data, epochs, train size, native or resampled test sizes),
so lines of two protocols, whose numbers are not comparable, never share axes.
The panels stack vertically with the legend beside each; an encoding keeps its
colour in every panel of a figure. On the resolution axis a non-square size
(``test/acc@res16x32``) sits at ``sqrt(h w)``, the side of the square with as many
pixels and tokens, as a triangle along its long side (:data:`vitpos.sizes.MARKERS`,
explained in the legend) not joined to its line. The x ticks are the tested sizes
and nothing else: the squares' names on the first row, the others' on a row below,
so that a non-square size next to a square one never prints over it.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from vitpos.compare.report import HASH, section_title
from vitpos.metrics import parse_metric
from vitpos.sizes import MARKERS, equivalent_side, orientation

#: the legend's words for a non-square size's marker (:data:`vitpos.sizes.MARKERS`)
SHAPE_LEGEND = {"wide": "wide size h×w (h < w), at √(h·w)", "tall": "tall size h×w (h > w), at √(h·w)"}

#: line style per strategy: the encoding's default solid, the others dashed or dotted
STRATEGY_STYLES = {"": "-", "interpolate": "--", "clamp": "--", "ntk": "-.", "dynamic": (0, (3, 1, 1, 1, 1, 1)),
                   "yarn": ":"}  # fmt: skip


def _save(fig: Figure, path: Path) -> None:
    fig.savefig(path, dpi=100)


def _axes(n: int, title: str, width: float) -> tuple[Figure, list]:
    """``n`` panels stacked vertically, each ``width`` wide (room for a legend on its right)."""
    fig = Figure(figsize=(width, 0.6 + 4.2 * n), layout="constrained")
    FigureCanvasAgg(fig)
    fig.suptitle(title)
    return fig, [fig.add_subplot(n, 1, i + 1) for i in range(n)]


def _colors(labels) -> dict[str, tuple]:
    """One colour per label (hash dropped), the same in every panel."""
    names = sorted({HASH.sub("", label) for label in labels})
    if len(names) <= 10:
        return {name: matplotlib.colormaps["tab10"](i) for i, name in enumerate(names)}
    # tab20 holds ten hues, dark then light: every dark one first, so neighbours differ in hue
    return {name: matplotlib.colormaps["tab20"]((2 * i) % 20 + (2 * i // 20) % 2) for i, name in enumerate(names)}


def _legend(ax, entries: int, shapes: tuple[str, ...] = ()) -> None:
    """The panel's legend on its right; ``shapes``: the non-square markers drawn, explained after the lines."""
    handles, labels = ax.get_legend_handles_labels()
    for shape in shapes:
        handles.append(Line2D([], [], marker=MARKERS[shape], ms=5, ls="none", color="0.35"))
        labels.append(SHAPE_LEGEND[shape])
    size = "small" if entries + len(shapes) <= 12 else "x-small"
    ax.legend(handles, labels, fontsize=size, loc="upper left", bbox_to_anchor=(1.01, 1.0), ncol=1 + entries // 20,
              frameon=False)  # fmt: skip


def plot_val_curves(runs: list, complete: set[tuple[str, str, str, str]], path: Path) -> list[str]:
    """val/acc vs step, one line per label (mean over the seeds logged at that step), one panel
    per (task, model, budget); dashed for lines without any complete seed (``complete`` holds the
    (task, model, budget, label) keys that have one). Returns the panel titles (empty: no plot)."""
    curves: dict[tuple, dict[str, list[pd.Series]]] = {}
    for r in runs:
        s = r.scalars.get("val/acc")
        if s is not None and not s.empty:
            series = s.drop_duplicates("step", keep="last").set_index("step")["value"]
            curves.setdefault((r.task, r.model, r.budget), {}).setdefault(r.label, []).append(series)
    if not curves:
        return []
    colors = _colors(label for lines in curves.values() for label in lines)
    titles = [section_title(*key, plain=True) for key in sorted(curves)]
    fig, axes = _axes(len(curves), "val/acc (mean over seeds)", width=10.0)
    for ax, title, (key, lines) in zip(axes, titles, sorted(curves.items())):
        for label, seeds in sorted(lines.items()):
            mean = pd.concat(seeds, axis=1).sort_index().mean(axis=1)
            name = HASH.sub("", label)
            done = (*key, label) in complete
            ax.plot(mean.index, 100 * mean.to_numpy(), marker="." if len(mean) < 30 else None, color=colors[name],
                    ls="-" if done else "--", label=name if done else f"{name} (incomplete)")  # fmt: skip
        ax.set(xlabel="step", ylabel="val/acc (%)")
        ax.set_title(title, fontsize="medium")
        ax.grid(alpha=0.3)
        _legend(ax, len(lines))
    _save(fig, path)
    return titles


def plot_extrapolation(groups: pd.DataFrame, kind: str, path: Path) -> list[str]:
    """Mean test accuracy (%) vs resolution (``res``) or length (``len``), one line per
    label[/strategy], one panel per (task, model, budget); a non-square size is a triangle at
    ``sqrt(h w)`` (module docstring). Returns the panel titles (empty: no plot)."""
    points = []  # (panel key, label, strategy, size name, x, upsampled, mean, std)
    for _, g in groups.iterrows():
        for c in groups.columns:
            m = parse_metric(c.removesuffix("_mean")) if c.endswith("_mean") else None
            if m and m.stat == "acc" and m.kind == kind and not math.isnan(g[c]):
                points.append(((g["task"], g["model"], g["budget"]), HASH.sub("", g["label"]), m.strategy or "",
                               m.size, equivalent_side(m.size), m.upsampled, 100 * g[c],
                               100 * g[c.replace("_mean", "_std")]))  # fmt: skip
    if not points:
        return []
    df = pd.DataFrame(points, columns=["key", "label", "strategy", "size", "x", "up", "mean", "std"])
    df["shape"] = [orientation(n) for n in df["size"]]
    what = "resolution (pixels)" if kind == "res" else "sequence length"
    colors = _colors(df["label"])
    keys = sorted(set(df["key"]))
    titles = [section_title(*key, plain=True) for key in keys]
    fig, axes = _axes(len(keys), f"test accuracy vs {what}: mean ± std over seeds", width=11.0)
    for ax, title, key in zip(axes, titles, keys):
        t = df[df["key"] == key]
        lines = t.groupby(["label", "strategy"], sort=True)
        for (label, strategy), d in lines:
            name, style = label + (f"/{strategy}" if strategy else ""), STRATEGY_STYLES.get(strategy, (0, (1, 1)))
            for shape, at in d.sort_values("x").groupby("shape"):  # h x w sizes: their own markers, off the line
                square = shape == "square"
                ax.errorbar(at["x"], at["mean"], yerr=np.nan_to_num(at["std"]), marker=MARKERS[shape],
                            ms=3 if square else 5, capsize=2, color=colors[label], ls=style if square else "none",
                            label=name if square else None)  # fmt: skip
        ax.set(xlabel=what, ylabel="test/acc (%)")
        ax.set_title(title, fontsize="medium")
        _size_ticks(ax, t)
        ax.grid(alpha=0.3)
        _legend(ax, lines.ngroups, tuple(s for s in SHAPE_LEGEND if s in set(t["shape"])))
    fig.draw_without_rendering()  # lay out the figure: the squares' tick names get their final height
    for ax in axes:
        _lower_minor_names(ax)
    _save(fig, path)
    return titles


def _tick_names(points: pd.DataFrame) -> tuple[list[float], list[str]]:
    """A tick per position, named by its sizes (``16x32`` and ``32x16`` share ``sqrt(512)``),
    ``(upsampled)`` under a size above native (resampled, no new detail)."""
    positions, names = [], []
    for x, at in points.groupby("x", sort=True):
        up = at.groupby("size")["up"].any()
        positions.append(x)
        names.append("\n".join(f"{n}\n(upsampled)" if u else n for n, u in up.items()))
    return positions, names


def _size_ticks(ax, points: pd.DataFrame) -> None:
    """The x ticks of one panel, exactly at its tested sizes: the squares' as the major ticks, the
    other sizes' as minor ticks, whose names :func:`_lower_minor_names` puts on a row of their own."""
    square = points["shape"] == "square"
    ax.set_xticks(*_tick_names(points[square]))
    ax.set_xticks(*_tick_names(points[~square]), minor=True)
    ax.xaxis.remove_overlapping_locs = False  # a minor tick at a square's position (16x64 at 32) keeps its name


def _lower_minor_names(ax) -> None:
    """The non-square sizes' tick names on a row below the squares' names (measured on the laid-out
    figure), so that one beside a square size (``16x32`` at 22.6 beside ``24``) never prints over it."""
    renderer = ax.figure.canvas.get_renderer()
    tallest = max((t.get_window_extent(renderer).height for t in ax.get_xticklabels() if t.get_text()), default=0.0)
    pad = matplotlib.rcParams["xtick.major.pad"] + tallest * 72 / ax.figure.dpi + 2  # pixels to points
    ax.tick_params(axis="x", which="minor", length=matplotlib.rcParams["xtick.major.size"], pad=pad)
