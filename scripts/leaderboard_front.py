"""The leaderboard's own uncertainty (scripts/leaderboard.py): an interval on native retention
from the seeds of ``extrapolation_native``, and how robust each encoding's place on the Pareto
front of test accuracy and native retention is.

Both axes have few seeds (two or three), too few to resample. Each axis is therefore drawn
**parametrically**: an encoding's mean plus its standard error times a Student t draw, the
standard error from the seed spread pooled over the encodings of that axis (the one-way residual,
as the reports' intervals), the t on the pool's degrees of freedom. Over :data:`DRAWS` joint draws
(seeded, so the page is reproducible) an encoding's **front frequency** is the share of draws in
which no other encoding beats it on both axes; only encodings at or above :data:`ROBUST` are
marked as on the front.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from scipy import stats

from vitpos.compare.stats import Group, pooled

from .report_rows import encoding_of, read_csv

DRAWS = 20_000
ROBUST = 0.9
LEVEL = 0.95


def native_seed_ratios(folder: Path) -> dict[str, list[float]]:
    """{encoding: [acc@32 / acc@16 of each seed]} of the single-size (16 px) runs in ``runs.csv``."""
    out: dict[str, list[float]] = {}
    for run in read_csv(folder / "runs.csv"):
        if run.get("status") != "complete" or "trained at 16 px" not in run["budget"]:
            continue
        low, high = run.get("test/acc@res16"), run.get("test/acc@res32")
        if low and high and float(low) > 0:
            out.setdefault(encoding_of(run["label"]), []).append(float(high) / float(low))
    return out


def pooled_spread(samples: dict[str, list[float]]) -> tuple[float, int]:
    """(pooled seed std, degrees of freedom) of per-encoding samples (vitpos/compare/stats.py)."""
    groups = [Group(k, float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else math.nan, len(v))
              for k, v in samples.items()]  # fmt: skip
    return pooled(groups)


def half_width(spread: float, df: int, n: int) -> float:
    """Half the 95% interval of a mean of ``n`` seeds from a pooled ``spread`` on ``df`` degrees of freedom."""
    return float(stats.t.ppf(0.5 + LEVEL / 2, df)) * spread / math.sqrt(n) if df > 0 and n > 0 else math.nan


def front_frequency(rows: list[dict], acc_spread: tuple[float, int], native_spread: tuple[float, int],
                    draws: int = DRAWS, seed: int = 0) -> dict[str, float]:  # fmt: skip
    """{encoding: share of joint parametric draws in which it is on the front}. Each row needs
    ``acc`` and ``native`` (the means), ``seeds`` and ``native_seeds`` (their seed counts)."""
    rng = np.random.default_rng(seed)
    names = [r["encoding"] for r in rows]

    def draw(means: np.ndarray, counts: np.ndarray, spread: tuple[float, int]) -> np.ndarray:
        s, df = spread
        if not df or math.isnan(s):
            return np.broadcast_to(means, (draws, len(means)))
        return means + s / np.sqrt(counts) * rng.standard_t(df, (draws, len(means)))

    acc = draw(np.array([r["acc"] for r in rows]), np.array([r["seeds"] for r in rows]), acc_spread)
    nat = draw(np.array([r["native"] for r in rows]), np.array([r["native_seeds"] for r in rows]), native_spread)
    # beaten[d, i, j]: in draw d, encoding j is at least as good as i on both axes and better on one
    ge = (acc[:, None, :] >= acc[:, :, None]) & (nat[:, None, :] >= nat[:, :, None])
    gt = (acc[:, None, :] > acc[:, :, None]) | (nat[:, None, :] > nat[:, :, None])
    on_front = ~(ge & gt).any(axis=2)
    return dict(zip(names, on_front.mean(axis=0).tolist()))
