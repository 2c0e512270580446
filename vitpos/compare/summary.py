"""One row per run, one row per (task, model, budget, label) with mean ± std over seeds, and the
report written from them: what ``python -m vitpos.compare`` runs (see the package docstring)."""

from __future__ import annotations

import math
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from vitpos.cli.options import expand_paths, option, parse_options
from vitpos.compare.plots import plot_extrapolation, plot_val_curves
from vitpos.compare.protocol import COLUMNS as PROTOCOL
from vitpos.compare.read import Job, Run, find_jobs, find_param_count, find_runs, read_run, runs_of_jobs
from vitpos.compare.report import markdown_report
from vitpos.compare.stats import Group, analyse
from vitpos.metrics import parse_metric
from vitpos.sizes import column_order


# --------------------------------------------------------------- summarizing
def divergence(run: Run) -> str | None:
    """Why the run counts as diverged, or None."""
    status = run.status or {}
    if status.get("status") == "diverged":
        why = status.get("reason") or status.get("message") or status.get("error")
        return f"diverged: {why}" if why else "diverged (metrics.json)"
    if (run.last("run/diverged") or 0) > 0:  # the divergence guard's scalar
        return "diverged (run/diverged logged)"
    loss = run.scalars.get("train/loss")
    if loss is not None and not np.isfinite(loss["value"].to_numpy()).all():
        step = int(loss["step"][~np.isfinite(loss["value"].to_numpy())].iloc[0])
        return f"diverged: train/loss non-finite from step {step}"
    if "test/acc" in run.scalars and not math.isfinite(run.last("test/acc")):
        return "diverged: test/acc is NaN"
    return None


def summarize(run: Run) -> dict:
    """One row per run: final test scalars, best/final val/acc, status and reason."""
    row = {"task": run.task, "model": run.model, "budget": run.budget, "label": run.label,
           "seed": run.seed, "path": str(run.path)}  # fmt: skip
    row.update(run.protocol.columns() if run.protocol is not None else dict.fromkeys(PROTOCOL))
    status = run.status or {}
    if run.error is None and not run.scalars and not status:
        run.error = "no scalars (no event files, or nothing logged yet)"
    val = run.scalars.get("val/acc")
    if val is not None and not val.empty:
        row["val/acc_best"], row["val/acc_final"] = float(val["value"].max()), float(val["value"].iloc[-1])
    for tag in run.scalars:
        if tag.startswith("test/"):
            row[tag] = run.last(tag)
    for tag, value in (status.get("metrics") or {}).items():  # what the event files lack
        if (
            tag.startswith(("test/", "val/acc_best", "time/"))
            and tag not in row
            and isinstance(value, (int, float))
            and value == value
        ):
            row[tag] = float(value)
    # a scalar (older runs and other loggers), else metrics.json (vitpos runs since the TEXT tables)
    logged = (run.last("params"), run.last("hp/params"), (status.get("metrics") or {}).get("params"))
    params = next((float(v) for v in logged if isinstance(v, (int, float))), None)
    row["params"] = params if params is not None else find_param_count(run.hparams)
    diverged = divergence(run) if run.error is None else None
    if run.error is not None:
        row["status"], row["reason"] = "failed", run.error
    elif diverged:
        row["status"], row["reason"] = "diverged", diverged
    elif "test/acc" in row and status.get("status", "complete") == "complete":
        row["status"] = "complete"
    else:
        epoch, steps = run.last("epoch"), [int(s["step"].max()) for s in run.scalars.values()]
        row["status"] = "incomplete"
        row["reason"] = (
            f"status {status['status']!r} in metrics.json" if status.get("status") not in (None, "complete")
            else f"no test/acc; last epoch {int(epoch) + 1}" if epoch is not None  # logged from 0, said from 1
            else f"no test/acc; last step {max(steps)}" if steps else "no test/acc"
        )  # fmt: skip
    row["complete"] = row["status"] == "complete"
    return row


def metric_order(name: str) -> tuple:
    """Sort key: val, test/acc, test/loss, acc@res by size (as the report's columns: the squares,
    then the others, 16, 24, 32, 16x32), acc@len by length, the rest."""
    m = parse_metric(name)
    if m and m.stat == "acc":
        return (2 if m.kind == "res" else 3, column_order(m.size), m.strategy or "")
    fixed = ["val/acc_best", "val/acc_final", "test/acc", "test/acc_raw", "test/loss", "time/fit_min", "time/eval_min"]
    return (0, (fixed.index(name),), "") if name in fixed else (4, (0,), name)


KEYS = ["task", "model", "budget", "label"]


def aggregate(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean and std (ddof=1; 0 for a single seed) over the complete seeds of every (task, model, budget, label),
    with the protocol columns of its runs (one protocol per budget, so the first run's)."""
    done = rows[rows["complete"].astype(bool)]  # astype: an empty object column would select columns
    metrics = sorted(
        (c for c in done.columns if c.startswith(("val/", "test/", "time/")) and done[c].notna().any()),
        key=metric_order,
    )
    metrics += ["params"] if "params" in done and done["params"].notna().any() else []
    out = []
    for key, g in done.groupby(KEYS, sort=True):
        seeds = sorted(s for s in g["seed"] if s is not None and not pd.isna(s))
        rec = {**dict(zip(KEYS, key)), "seeds": len(g), "seed_list": " ".join(str(int(s)) for s in seeds)}
        rec.update({c: g[c].iloc[0] for c in PROTOCOL if c in g})
        for m in metrics:
            v = g[m].dropna().to_numpy(dtype=float)
            rec[f"{m}_mean"] = v.mean() if len(v) else math.nan
            rec[f"{m}_std"] = v.std(ddof=1) if len(v) >= 2 else (0.0 if len(v) else math.nan)
        out.append(rec)
    return add_statistics(pd.DataFrame(out, columns=None if out else [*KEYS, "seeds", "seed_list"]))


SECTION = ["task", "model", "budget"]


def add_statistics(groups: pd.DataFrame, metric: str = "test/acc") -> pd.DataFrame:
    """``metric``'s 95% interval (``_ci_low``, ``_ci_high``; empty for one seed) and its letters
    (``_group``: labels sharing a letter are not distinguishable) within each report section
    (:func:`vitpos.compare.stats.analyse`)."""
    if f"{metric}_mean" not in groups or not len(groups):
        return groups
    groups = groups.copy()
    for column in ("_ci_low", "_ci_high", "_group"):
        groups[metric + column] = None
    for _, sel in groups.groupby(SECTION, sort=False):
        stats = analyse([Group(r["label"], r[f"{metric}_mean"], r[f"{metric}_std"] if r["seeds"] >= 2 else math.nan,
                               int(r["seeds"])) for _, r in sel.iterrows()])  # fmt: skip
        for index, row in sel.iterrows():
            interval = stats.interval.get(row["label"])
            if interval and "acc" in metric:  # an accuracy is a fraction: its interval stops at 0 and 1
                interval = (max(interval[0], 0.0), min(interval[1], 1.0))
            groups.loc[index, [f"{metric}_ci_low", f"{metric}_ci_high"]] = interval if interval else (None, None)
            groups.loc[index, f"{metric}_group"] = stats.letters.get(row["label"], "")
    return groups


# ----------------------------------------------------------------------- API
@dataclass
class Comparison:
    """What :func:`compare` read and wrote: ``groups`` (one row per (task, model, budget, label):
    report.csv), ``runs`` (one row per run, with its status: runs.csv), both with the protocol
    columns of :mod:`vitpos.compare.protocol`; the Hydra ``jobs`` found; the Markdown ``report``
    (report.md) and the folder ``out`` it was all written to."""

    groups: pd.DataFrame
    runs: pd.DataFrame
    jobs: list[Job]
    report: str
    out: Path


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    """``frame`` as CSV without the protocol columns: the CSVs keep the layout of the committed
    reports, which the protocol's sentence (the ``budget`` column) names already."""
    frame.drop(columns=[c for c in PROTOCOL if c in frame]).to_csv(path, index=False)


def refuse_a_file_for_the_report(out: Path) -> None:
    """The report is a folder: ``out`` naming a file, or a path through one, or a folder this process
    cannot write, is refused before anything is read or written (the file is left untouched)."""
    blocking = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        what = "is a file, not a folder" if blocking == out else f"lies inside the file {blocking}, not a folder"
        raise NotADirectoryError(f"out={out}: {what} (pass out=<a folder> for report.md, the CSVs and the plots)")
    here = next(p for p in (out, *out.parents) if p.exists())
    try:  # a probe file, removed at once: a read-only disk refuses even root, which os.access would not say
        handle, probe = tempfile.mkstemp(dir=here, prefix=".vitpos-write-probe-")
        os.close(handle)
        os.unlink(probe)
    except OSError as err:
        raise PermissionError(
            f"out={out}: {here} is not writable ({err.strerror}) (pass out=<a folder you can write>)"
        ) from None


def compare(runs_dir: str | Path, out_dir: str | Path | None = None, multirun: list | None = None) -> Comparison:
    """Read every run under ``runs_dir`` (and the Hydra jobs under ``runs_dir`` and
    ``multirun``), write the report to ``out_dir`` (default ``runs_dir/report``) and
    return what was read and written."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        raise FileNotFoundError(f"{runs_dir}: no such folder; pass the folder your runs are in (run.root, e.g. runs/)")
    out = Path(out_dir) if out_dir is not None else runs_dir / "report"
    refuse_a_file_for_the_report(out)
    for folder in map(Path, multirun or []):
        if not folder.is_dir():
            raise FileNotFoundError(
                f"multirun={folder}: no such folder; pass a Hydra multirun folder (multirun/<date>/<time>) or leave "
                "multirun= out"
            )
    jobs = find_jobs([runs_dir, *map(Path, multirun or [])])
    runs = find_runs(runs_dir, skip=out)
    runs = [read_run(r) for r in runs + runs_of_jobs(jobs, runs)]  # a multirun folder: its jobs' runs too
    if not runs and not jobs:
        raise FileNotFoundError(
            f"no runs under {runs_dir}: expected folders holding TensorBoard event files or metrics.json, "
            "e.g. runs/<group>/<model>/<label>/seed<k>/"
        )
    rows = run_rows(runs, runs_dir)
    groups = aggregate(rows)
    out.mkdir(parents=True, exist_ok=True)
    notes = []
    complete = set(zip(groups["task"], groups["model"], groups["budget"], groups["label"]))
    if not plot_val_curves(runs, complete, out / "val_acc_curves.png"):
        notes.append("_No val/acc logged: val_acc_curves.png not drawn._")
    for kind, name in (("res", "acc_vs_resolution.png"), ("len", "acc_vs_length.png")):
        if not plot_extrapolation(groups, kind, out / name):
            notes.append(f"_No test/acc@{kind}* logged: {name} not drawn._")
    report = markdown_report(rows, groups, jobs, notes)
    (out / "report.md").write_text(report)
    write_csv(groups, out / "report.csv")
    write_csv(rows, out / "runs.csv")
    return Comparison(groups, rows, jobs, report, out)


def run_rows(runs: list[Run], runs_dir: Path) -> pd.DataFrame:
    """One row per run (:func:`summarize`), paths relative to ``runs_dir`` where they lie below it."""
    empty = pd.DataFrame(columns=[*KEYS, "seed", "path", "status", "reason", "complete"])
    rows = pd.DataFrame([summarize(r) for r in runs]) if runs else empty
    for column in empty.columns.difference(rows.columns):  # runs that could not even be identified
        rows[column] = False if column == "complete" else None
    rows["path"] = [Path(p).relative_to(runs_dir).as_posix() if Path(p).is_relative_to(runs_dir) else p
                    for p in rows["path"]]  # fmt: skip
    return rows


@dataclass
class CompareOptions:
    """Turn a folder of runs into report.md (accuracy in %, mean ± std over seeds), report.csv,
    runs.csv and plots.

    A run is any folder below runs= holding TensorBoard event files or a metrics.json, at any
    depth (runs/<group>/<model>/<label>-<hash>/seed<k>). Only complete runs (they logged
    test/acc) enter the means; diverged, failed and incomplete runs are listed with their reason.
    Hydra multirun job folders found below runs= or given with multirun= are listed with their
    overrides, failed jobs with their error line. The report folder is rewritten.

    Examples:
      python -m vitpos.compare runs=runs/shapes out=runs/shapes/report    # out= defaults to RUNS/report
      python -m vitpos.compare runs=runs/compare_cifar_quick out=runs/compare_cifar_quick/report
      python -m vitpos.compare runs=runs/compare_cifar_quick multirun=[multirun]     # + the sweeps' jobs
    """

    runs: str = option(help="the folder of runs, searched at any depth", metavar="DIR", example="runs/shapes")
    out: str | None = option(None, "the report folder; its files are rewritten", metavar="DIR",
                             default_text="<runs>/report")  # fmt: skip
    multirun: list[str] = option([], "Hydra multirun folders whose jobs to list", metavar="[DIR,...]", repeat=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m vitpos.compare runs=DIR [out=DIR] [multirun=[DIR,...]]``: see :class:`CompareOptions`."""
    opts = parse_options(argv, CompareOptions, prog="python -m vitpos.compare")
    try:
        result = compare(opts.runs, opts.out, expand_paths("multirun", opts.multirun))
    except (FileNotFoundError, NotADirectoryError, PermissionError) as err:  # no runs; out= a file, not writable
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(result.report)
    print(f"written to {result.out}")
    return 0
