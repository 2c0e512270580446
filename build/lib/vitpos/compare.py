"""Turn a folder of TensorBoard runs into one table and a few plots.

    python -m vitpos.compare runs/ [--out runs/report]

Runs are laid out as ``RUNS_DIR/<task>/<label>/seed<k>/`` (label: the encoding
name, then ``@strategy`` for a non-default strategy; combinations join parts
with ``+``), each holding the event files of Lightning's ``TensorBoardLogger``
(possibly inside ``version_*/``). Every run is read with TensorBoard's own
reader; a run is *complete* when it logged ``test/acc``.
Incomplete runs are listed with the reason, never silently dropped, and are
left out of the means (their validation curves are still drawn).

Writes ``report.md`` (one table per task, mean ± std over seeds), ``report.csv``
(one row per (task, label), ``<metric>_mean``/``<metric>_std`` columns) and
``val_acc_curves.png``, ``acc_vs_resolution.png``, ``acc_vs_length.png``.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import yaml
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from vitpos.tables import markdown_table as render_markdown

EXTRAP = re.compile(r"^test/acc@(res|len)(\d+)(?:/(.+))?$")  # test/acc@res48, test/acc@len256/ntk
SEED_DIR = re.compile(r"^seed(\d+)$")
PARAM_KEYS = ("params", "num_params", "n_params")


@dataclass
class Run:
    """One seed of one (task, label): its scalars as (wall_time, step, value) rows."""

    task: str
    label: str
    seed: int
    path: Path
    scalars: dict[str, pd.DataFrame] = field(default_factory=dict)
    hparams: dict = field(default_factory=dict)
    error: str | None = None

    def last(self, tag: str) -> float | None:
        s = self.scalars.get(tag)
        return None if s is None or s.empty else float(s["value"].iloc[-1])


# ------------------------------------------------------------------- reading
def find_runs(runs_dir: Path) -> list[Run]:
    """Every ``<task>/<label>/seed<k>`` folder under ``runs_dir`` (or ``<label>/seed<k>``
    when ``runs_dir`` is itself one task's folder)."""
    runs = []
    for pattern, task_of in (("*/*/seed*", lambda p: p.parent.parent.name), ("*/seed*", lambda p: runs_dir.name)):
        for path in sorted(runs_dir.glob(pattern)):
            m = SEED_DIR.match(path.name)
            if m and path.is_dir():
                runs.append(Run(task_of(path), path.parent.name, int(m.group(1)), path))
        if runs:
            break
    return runs


def read_scalars(run_dir: Path) -> dict[str, pd.DataFrame]:
    """All scalars of all event files below ``run_dir``, merged and ordered by wall time."""
    rows = []
    for f in sorted(run_dir.rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(f), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            rows += [(tag, e.wall_time, e.step, e.value) for e in acc.Scalars(tag)]
    df = pd.DataFrame(rows, columns=["tag", "wall_time", "step", "value"])
    df = df.sort_values(["wall_time", "step"], kind="stable")
    return {tag: g.drop(columns="tag").reset_index(drop=True) for tag, g in df.groupby("tag", sort=False)}


def read_hparams(run_dir: Path) -> dict:
    for f in sorted(run_dir.rglob("hparams.yaml")):
        try:
            return yaml.safe_load(f.read_text()) or {}
        except yaml.YAMLError:
            continue
    return {}


def find_param_count(hparams, depth: int = 0) -> float | None:
    """A number logged as ``params`` (or ``num_params``) anywhere in the hparams."""
    if not isinstance(hparams, dict) or depth > 5:
        return None
    for key in PARAM_KEYS:
        if isinstance(hparams.get(key), (int, float)):
            return float(hparams[key])
    for value in hparams.values():
        found = find_param_count(value, depth + 1)
        if found is not None:
            return found
    return None


def load_run(run: Run) -> Run:
    try:
        run.scalars, run.hparams = read_scalars(run.path), read_hparams(run.path)
    except Exception as err:  # noqa: BLE001  (a corrupt file must not hide the other runs)
        run.error = f"could not read its event files: {err}"
    return run


# --------------------------------------------------------------- summarizing
def summarize(run: Run) -> dict:
    """One row per run: final test scalars, best/final val/acc, completeness."""
    row = {"task": run.task, "label": run.label, "seed": run.seed, "path": str(run.path)}
    if run.error is None and not run.scalars:
        run.error = "no scalars (no event files, or nothing logged yet)"
    val = run.scalars.get("val/acc")
    if val is not None and not val.empty:
        row["val/acc_best"], row["val/acc_final"] = float(val["value"].max()), float(val["value"].iloc[-1])
    for tag in run.scalars:
        if tag.startswith("test/"):
            row[tag] = run.last(tag)
    params = next((v for v in (run.last("params"), run.last("hp/params")) if v is not None), None)
    row["params"] = params if params is not None else find_param_count(run.hparams)
    row["complete"] = run.error is None and "test/acc" in run.scalars
    if run.error is not None:
        row["reason"] = run.error
    elif not row["complete"]:
        epoch, steps = run.last("epoch"), [int(s["step"].max()) for s in run.scalars.values()]
        row["reason"] = (
            f"no test/acc; last epoch {int(epoch)}" if epoch is not None else f"no test/acc; last step {max(steps)}"
        )
    return row


def metric_order(name: str) -> tuple:
    """Sort key: val, test/acc, test/loss, acc@res by size, acc@len by length, the rest."""
    m = EXTRAP.match(name)
    if m:
        return (2 if m.group(1) == "res" else 3, int(m.group(2)), m.group(3) or "")
    fixed = ["val/acc_best", "val/acc_final", "test/acc", "test/loss"]
    return (0, fixed.index(name), "") if name in fixed else (4, 0, name)


def aggregate(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean and std (ddof=1; 0 for a single seed) over the complete seeds of every (task, label)."""
    done = rows[rows["complete"]]
    metrics = sorted(
        (c for c in done.columns if c.startswith(("val/", "test/")) and done[c].notna().any()), key=metric_order
    )
    metrics += ["params"] if "params" in done and done["params"].notna().any() else []
    out = []
    for (task, label), g in done.groupby(["task", "label"], sort=True):
        rec = {"task": task, "label": label, "seeds": len(g), "seed_list": " ".join(map(str, sorted(g["seed"])))}
        for m in metrics:
            v = g[m].dropna().to_numpy(dtype=float)
            rec[f"{m}_mean"] = v.mean() if len(v) else math.nan
            rec[f"{m}_std"] = v.std(ddof=1) if len(v) >= 2 else (0.0 if len(v) else math.nan)
        out.append(rec)
    return pd.DataFrame(out, columns=None if out else ["task", "label", "seeds", "seed_list"])


# ------------------------------------------------------------------ markdown
def fmt(mean: float, std: float, seeds: int) -> str:
    if mean is None or math.isnan(mean):
        return ""
    return f"{mean:.4f} ± {std:.4f}" if seeds >= 2 else f"{mean:.4f} ± —"


def fmt_params(n: float) -> str:
    if n is None or math.isnan(n):
        return ""
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else f"{n:.0f}"


def markdown_table(groups: pd.DataFrame) -> str:
    """One task's groups as a Markdown table, best test/acc first."""
    metrics = [c[: -len("_mean")] for c in groups.columns if c.endswith("_mean") and groups[c].notna().any()]
    shown = ["val/acc_best", "test/acc"] + [m for m in metrics if EXTRAP.match(m)]
    shown = [m for m in shown if m in metrics]
    header = ["label", "seeds"] + (["params"] if "params" in metrics else [])
    header += [
        "val/acc (best)" if m == "val/acc_best" else m if m == "test/acc" else m.removeprefix("test/") for m in shown
    ]
    order = groups.sort_values(["test/acc_mean", "label"], ascending=[False, True]) if "test/acc" in metrics else groups
    rows = []
    for _, g in order.iterrows():
        cells = [f"`{g['label']}`", str(g["seeds"])] + ([fmt_params(g["params_mean"])] if "params" in metrics else [])
        rows.append(cells + [fmt(g[f"{m}_mean"], g[f"{m}_std"], g["seeds"]) for m in shown])
    return render_markdown(header, rows)


def markdown_report(rows: pd.DataFrame, groups: pd.DataFrame, notes: list[str]) -> str:
    parts = ["# Results", "", "Mean ± std over complete seeds (std with ddof=1; — for a single seed)."]
    for task in sorted(rows["task"].unique()):
        g = groups[groups["task"] == task] if len(groups) else groups
        parts += ["", f"## {task}", "", markdown_table(g) if len(g) else "_No complete runs._"]
    bad = rows[~rows["complete"]].sort_values(["task", "label", "seed"])
    parts += ["", "## Incomplete or failed runs", ""]
    parts += [f"- `{r.task}/{r.label}/seed{r.seed}`: {r.reason}" for r in bad.itertuples()] or [
        f"None: all {len(rows)} runs are complete."
    ]
    return "\n".join(parts + ([""] + notes if notes else []) + [""])


# --------------------------------------------------------------------- plots
def _save(fig: Figure, path: Path) -> None:
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=100)


def _axes(n: int, title: str, width: float = 5.5) -> tuple[Figure, list]:
    fig = Figure(figsize=(width * n, 4.8), layout="constrained")
    fig.suptitle(title)
    return fig, [fig.add_subplot(1, n, i + 1) for i in range(n)]


def plot_val_curves(runs: list[Run], complete: set[tuple[str, str]], path: Path) -> bool:
    """val/acc vs step, one line per label (mean over the seeds logged at that step), one panel per task;
    dashed for labels without any complete seed."""
    curves: dict[str, dict[str, list[pd.Series]]] = {}
    for r in runs:
        s = r.scalars.get("val/acc")
        if s is not None and not s.empty:
            series = s.drop_duplicates("step", keep="last").set_index("step")["value"]
            curves.setdefault(r.task, {}).setdefault(r.label, []).append(series)
    if not curves:
        return False
    fig, axes = _axes(len(curves), "val/acc (mean over seeds)")
    for ax, (task, labels) in zip(axes, sorted(curves.items())):
        for label, seeds in sorted(labels.items()):
            mean = pd.concat(seeds, axis=1).sort_index().mean(axis=1)
            done = (task, label) in complete
            ax.plot(
                mean.index,
                mean.to_numpy(),
                marker="." if len(mean) < 30 else None,
                ls="-" if done else "--",
                label=label if done else f"{label} (incomplete)",
            )
        ax.set(title=task, xlabel="step", ylabel="val/acc")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    _save(fig, path)
    return True


def plot_extrapolation(groups: pd.DataFrame, kind: str, path: Path) -> bool:
    """Mean test accuracy vs resolution (``res``) or length (``len``), one line per label[/strategy]."""
    points = []  # (task, line, x, mean, std)
    for _, g in groups.iterrows():
        for c in groups.columns:
            m = EXTRAP.match(c.removesuffix("_mean")) if c.endswith("_mean") else None
            if m and m.group(1) == kind and not math.isnan(g[c]):
                line = g["label"] + (f"/{m.group(3)}" if m.group(3) else "")
                points.append((g["task"], line, int(m.group(2)), g[c], g[c.replace("_mean", "_std")]))
    if not points:
        return False
    df = pd.DataFrame(points, columns=["task", "line", "x", "mean", "std"])
    what = "resolution (pixels)" if kind == "res" else "sequence length"
    fig, axes = _axes(df["task"].nunique(), f"test accuracy vs {what}", width=9.5)
    for ax, (task, t) in zip(axes, df.groupby("task")):
        labels = sorted({line.split("/")[0] for line in t["line"]})
        colors = {label: matplotlib.colormaps["tab20"](i % 20) for i, label in enumerate(labels)}
        for line, d in t.groupby("line"):
            d = d.sort_values("x")
            label, _, strategy = line.partition("/")
            style = STRATEGY_STYLES.get(strategy, (0, (1, 1)))
            ax.errorbar(d["x"], d["mean"], yerr=np.nan_to_num(d["std"]), marker="o", ms=3, capsize=2,
                        color=colors[label], ls=style, label=line)  # fmt: skip
        ax.set(title=task, xlabel=what, ylabel="test/acc")
        ax.set_xticks(sorted(t["x"].unique()))
        ax.grid(alpha=0.3)
        columns = 1 + len(t["line"].unique()) // 24
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0), ncol=columns)
    _save(fig, path)
    return True


#: line style per strategy: the encoding's default solid, the others dashed or dotted
STRATEGY_STYLES = {"": "-", "interpolate": "--", "clamp": "--", "ntk": "-.", "dynamic": (0, (3, 1, 1, 1, 1, 1)),
                   "yarn": ":"}  # fmt: skip


# ----------------------------------------------------------------------- API
def compare(runs_dir: str | Path, out_dir: str | Path | None = None) -> pd.DataFrame:
    """Read every run under ``runs_dir``, write the report to ``out_dir``
    (default ``runs_dir/report``) and return one row per (task, label)."""
    runs_dir = Path(runs_dir)
    out = Path(out_dir) if out_dir is not None else runs_dir / "report"
    runs = [load_run(r) for r in find_runs(runs_dir)]
    if not runs:
        raise FileNotFoundError(f"no runs under {runs_dir}: expected folders {runs_dir}/<task>/<label>/seed<k>/")
    rows = pd.DataFrame([summarize(r) for r in runs])
    groups = aggregate(rows)
    out.mkdir(parents=True, exist_ok=True)
    notes = []
    stray = sorted(
        {f.parent for f in runs_dir.rglob("events.out.tfevents.*") if not any(f.is_relative_to(r.path) for r in runs)}
    )
    if stray:
        where = ", ".join(f"`{p.relative_to(runs_dir)}`" for p in stray[:10]) + (" ..." if len(stray) > 10 else "")
        notes.append(f"_Ignored event files outside the <task>/<label>/seed<k>/ layout: {where}._")
    complete = set(zip(groups["task"], groups["label"]))
    if not plot_val_curves(runs, complete, out / "val_acc_curves.png"):
        notes.append("_No val/acc logged: val_acc_curves.png not drawn._")
    for kind, name in (("res", "acc_vs_resolution.png"), ("len", "acc_vs_length.png")):
        if not plot_extrapolation(groups, kind, out / name):
            notes.append(f"_No test/acc@{kind}* logged: {name} not drawn._")
    report = markdown_report(rows, groups, notes)
    (out / "report.md").write_text(report)
    groups.to_csv(out / "report.csv", index=False)
    groups.attrs["report"] = report
    groups.attrs["runs"] = rows
    return groups


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vitpos.compare", description=__doc__.split("\n")[0])
    parser.add_argument("runs_dir", help="folder laid out as <task>/<label>/seed<k>/")
    parser.add_argument("--out", default=None, help="report folder (default: RUNS_DIR/report)")
    args = parser.parse_args(argv)
    try:
        groups = compare(args.runs_dir, args.out)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(groups.attrs["report"])
    print(f"written to {Path(args.out) if args.out else Path(args.runs_dir) / 'report'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
