"""The plots of ``vitpos.compare``: val/acc curves and accuracy vs resolution / length.

One panel per task; when a task holds several models or budgets, each line's
name carries its model and budget so that lines of different runs are never
taken for the same encoding.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from vitpos.compare.report import EXTRAP, HASH

#: line style per strategy: the encoding's default solid, the others dashed or dotted
STRATEGY_STYLES = {"": "-", "interpolate": "--", "clamp": "--", "ntk": "-.", "dynamic": (0, (3, 1, 1, 1, 1, 1)),
                   "yarn": ":"}  # fmt: skip


def _save(fig: Figure, path: Path) -> None:
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=100)


def _axes(n: int, title: str, width: float = 5.5) -> tuple[Figure, list]:
    fig = Figure(figsize=(width * n, 4.8), layout="constrained")
    fig.suptitle(title)
    return fig, [fig.add_subplot(1, n, i + 1) for i in range(n)]


def _name(label: str, model: str, budget: str, several: bool) -> str:
    label = HASH.sub("", label)
    return f"{label} [{model}, {budget}]" if several and (model or budget) else label


def plot_val_curves(runs: list, complete: set[tuple[str, str]], path: Path) -> bool:
    """val/acc vs step, one line per (model, budget, label) (mean over the seeds logged at that
    step), one panel per task; dashed for lines without any complete seed."""
    curves: dict[str, dict[tuple, list[pd.Series]]] = {}
    for r in runs:
        s = r.scalars.get("val/acc")
        if s is not None and not s.empty:
            series = s.drop_duplicates("step", keep="last").set_index("step")["value"]
            curves.setdefault(r.task, {}).setdefault((r.model, r.budget, r.label), []).append(series)
    if not curves:
        return False
    fig, axes = _axes(len(curves), "val/acc (mean over seeds)")
    for ax, (task, lines) in zip(axes, sorted(curves.items())):
        several = len({k[:2] for k in lines}) > 1
        for (model, budget, label), seeds in sorted(lines.items()):
            mean = pd.concat(seeds, axis=1).sort_index().mean(axis=1)
            done = (task, label) in complete
            name = _name(label, model, budget, several)
            ax.plot(mean.index, 100 * mean.to_numpy(), marker="." if len(mean) < 30 else None,
                    ls="-" if done else "--", label=name if done else f"{name} (incomplete)")  # fmt: skip
        ax.set(title=task, xlabel="step", ylabel="val/acc (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    _save(fig, path)
    return True


def plot_extrapolation(groups: pd.DataFrame, kind: str, path: Path) -> bool:
    """Mean test accuracy (%) vs resolution (``res``) or length (``len``), one line per label[/strategy]."""
    points = []  # (task, key, line, x, mean, std)
    for _, g in groups.iterrows():
        for c in groups.columns:
            m = EXTRAP.match(c.removesuffix("_mean")) if c.endswith("_mean") else None
            if m and m.group(1) == kind and not math.isnan(g[c]):
                points.append((g["task"], (g["model"], g["budget"], g["label"]), m.group(4) or "", int(m.group(2)),
                               100 * g[c], 100 * g[c.replace("_mean", "_std")]))  # fmt: skip
    if not points:
        return False
    df = pd.DataFrame(points, columns=["task", "key", "strategy", "x", "mean", "std"])
    what = "resolution (pixels)" if kind == "res" else "sequence length"
    fig, axes = _axes(df["task"].nunique(), f"test accuracy vs {what}", width=9.5)
    for ax, (task, t) in zip(axes, df.groupby("task")):
        keys = sorted(set(t["key"]))
        several = len({k[:2] for k in keys}) > 1
        colors = {k: matplotlib.colormaps["tab20"](i % 20) for i, k in enumerate(keys)}
        for (key, strategy), d in t.groupby(["key", "strategy"], sort=True):
            d = d.sort_values("x")
            name = _name(key[2], key[0], key[1], several) + (f"/{strategy}" if strategy else "")
            ax.errorbar(d["x"], d["mean"], yerr=np.nan_to_num(d["std"]), marker="o", ms=3, capsize=2,
                        color=colors[key], ls=STRATEGY_STYLES.get(strategy, (0, (1, 1))), label=name)  # fmt: skip
        ax.set(title=task, xlabel=what, ylabel="test/acc (%)")
        ax.set_xticks(sorted(t["x"].unique()))
        ax.grid(alpha=0.3)
        columns = 1 + len(t.groupby(["key", "strategy"])) // 24
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0), ncol=columns)
    _save(fig, path)
    return True
