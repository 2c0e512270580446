"""Minutes a benchmark run takes on this machine kind, from the committed runs' own times.

A committed run records its machine kind (``run.machine``) and its minutes (``time/fit_min`` +
``time/eval_min`` in ``metrics.json``). Runs of this budget on this kind are a measurement; runs
of this budget on another kind are scaled by :func:`kind_ratio`, the range of this kind's minutes
over the other's across every configuration (budget, model, encoding) that the committed reports
trained on both kinds. Nothing here times anything; the ratios move when new runs are committed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from statistics import mean

from vitpos.compare.read import find_runs
from vitpos.run.status import read_status


@dataclass(frozen=True)
class Minutes:
    """Expected minutes of one run, ``low``-``high`` (equal when measured; None: no basis); ``how``:
    measured, estimated or unknown; ``basis``: what they come from, one sentence shared by the runs it covers."""

    low: float | None
    high: float | None
    how: str
    basis: str

    def text(self) -> str:
        if self.low is None:
            return "minutes unknown"
        span = f"{self.low:.0f}" if round(self.low) == round(self.high) else f"{self.low:.0f}-{self.high:.0f}"
        return f"about {span} min each ({self.how})"


def minutes_of(run) -> float | None:
    """A finished run's minutes (fit + evaluation), None where ``metrics.json`` lacks them."""
    metrics = (run.status or {}).get("metrics") or {}
    fit = metrics.get("time/fit_min")
    if fit is None or math.isnan(fit):
        return None
    return fit + (metrics.get("time/eval_min") or 0.0)


def kind_of(run) -> str | None:
    return (((run.hparams or {}).get("cfg") or {}).get("run") or {}).get("machine")


def encoding_of(run) -> str | None:
    return (((run.hparams or {}).get("cfg") or {}).get("encoding") or {}).get("name")


def run_minutes(encoding: str, kind: str, runs: list, results: Path) -> Minutes:
    """The minutes of ``encoding`` on ``kind`` from ``runs`` (committed, of this budget): see the module docstring."""
    timed = [(r, m) for r in runs if (m := minutes_of(r)) is not None]
    here = [(r, m) for r, m in timed if kind_of(r) == kind]
    if here:
        own = [m for r, m in here if encoding_of(r) == encoding]
        whose = f"mean of its {len(own)} committed runs" if own else f"mean of {len(here)} committed runs of others"
        value = mean(own or [m for _, m in here])
        return Minutes(value, value, f"measured, {whose}",
                       f"the mean minutes of committed runs of this budget on {kind}")  # fmt: skip
    estimates = []
    for other in sorted({kind_of(r) for r, _ in timed} - {None}):
        ratio = kind_ratio(str(results), kind, other)
        if ratio is None:
            continue
        theirs = [(r, m) for r, m in timed if kind_of(r) == other]
        own = [m for r, m in theirs if encoding_of(r) == encoding] or [m for _, m in theirs]
        low, high, pairs = ratio
        estimates.append(Minutes(mean(own) * low, mean(own) * high, f"estimated from {mean(own):.1f} min on {other}",
                                 f"committed {other} minutes of this budget × {low:.1f}-{high:.1f}, the ratio of "
                                 f"{kind} to {other} minutes over the {pairs} configurations committed on both "
                                 "kinds"))  # fmt: skip
    if estimates:
        return estimates[0]
    seen = ", ".join(sorted({str(kind_of(r)) for r, _ in timed})) or "none"
    return Minutes(None, None, "unknown",
                   f"no committed run of this budget on {kind}, and no configuration committed on {kind} and on "
                   f"{seen} gives a ratio")  # fmt: skip


@cache
def snapshot_runs(folder: Path) -> tuple:
    """The runs of a committed snapshot folder, each with its ``metrics.json`` (read once per process:
    the plan and :func:`kind_ratio` both read them; no event file is read)."""
    runs = find_runs(folder)
    for run in runs:
        run.status = read_status(run.path)
    return tuple(runs)


@cache
def kind_ratio(results: str, kind: str, other: str) -> tuple[float, float, int] | None:
    """(lowest, highest, count) of the ratio of mean minutes on ``kind`` to those on ``other`` over the
    configurations (budget, model, encoding) committed under ``results`` on both; None when there are none."""
    times: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for runs in sorted(Path(results).glob("*/runs")):
        for run in snapshot_runs(runs):
            minutes = minutes_of(run)
            if minutes is not None and (run.status or {}).get("status") == "complete":
                times[(run.budget, run.model, encoding_of(run))][str(kind_of(run))].append(minutes)
    ratios = [mean(t[kind]) / mean(t[other]) for t in times.values() if t.get(kind) and t.get(other)]
    return (min(ratios), max(ratios), len(ratios)) if ratios else None
