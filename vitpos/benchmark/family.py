"""The new encoding's own family of tests: what the benchmark claims about it, and how surely.

The committed encodings were compared among themselves when they were committed; their letters
stay as committed and no committed pair is tested again here. The benchmark asks only about the
new encoding:

- **primary**: the new encoding against ``rope_2d`` (the field's common default) and against
  ``none``, Holm over those two contrasts;
- **secondary**: the new encoding against each of the k−1 committed encodings, Holm over those k−1.

**Seed as a block.** At seed k every encoding shares the batch order and the augmentation draws,
so a new seed k is paired with committed seed k: the accuracies are fit by the two-way additive
model ``acc = mu + encoding + seed`` (least squares, :func:`block_fit`), and every contrast is a
t test on its residual variance. With no residual spread or fewer than 2 degrees of freedom
nothing is resolved, and the verdict says why.

**Spread screen.** A noisy new encoding would borrow the pool's spread. :func:`spread_screen`
tests its own seed variance against the committed encodings' pooled one-way variance (an F test,
one-sided): it is a screen, with little power at n−1 = 2 degrees of freedom.

**Seeds to resolve.** :func:`seeds_to_resolve`: the seeds per encoding at which the difference
to the nearest committed encoding would be resolved as one planned pair (two-sided α = 0.05) with
80% power, for the residual spread found (a noncentral t power calculation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from vitpos.compare.stats import holm

ALPHA = 0.05
POWER = 0.8
PRIMARY = ("rope_2d", "none")
MAX_SEEDS = 10_000
ROUNDING = 1e-9  # a residual seed spread below this (in accuracy) is float rounding of an exact fit


@dataclass(frozen=True)
class BlockFit:
    """The two-way fit of a table ``{encoding: {seed: accuracy}}``: coefficients, their unscaled
    covariance (pinv of X'X), residual variance ``s2`` and its degrees of freedom ``df``."""

    labels: list[str]
    beta: np.ndarray
    cov: np.ndarray
    s2: float
    df: int

    def contrast(self, a: str, b: str) -> tuple[float, float]:
        """(estimate, standard error) of encoding ``a`` minus encoding ``b``, seed effects removed."""
        c = np.zeros(len(self.beta))
        for label, sign in ((a, 1.0), (b, -1.0)):
            i = self.labels.index(label)
            if i > 0:  # the first label is the reference level: its effect is 0
                c[i] += sign
        return float(c @ self.beta), math.sqrt(max(self.s2 * float(c @ self.cov @ c), 0.0))


def block_fit(table: dict[str, dict[int, float]]) -> BlockFit:
    """Least squares of ``acc = mu + encoding + seed`` over every (encoding, seed) cell of ``table``."""
    labels = sorted(table)
    seeds = sorted({s for cells in table.values() for s in cells})
    rows, y = [], []
    for label in labels:
        for seed, value in sorted(table[label].items()):
            x = np.zeros(len(labels) + len(seeds) - 1)
            x[0] = 1.0
            if (i := labels.index(label)) > 0:
                x[i] = 1.0
            if (j := seeds.index(seed)) > 0:
                x[len(labels) + j - 1] = 1.0
            rows.append(x)
            y.append(value)
    X, Y = np.array(rows), np.array(y)  # (N, k + s - 1), (N,)
    beta = np.linalg.lstsq(X, Y, rcond=None)[0]
    df = len(Y) - int(np.linalg.matrix_rank(X))
    s2 = float(np.sum((Y - X @ beta) ** 2) / df) if df > 0 else math.nan
    return BlockFit(labels, beta, np.linalg.pinv(X.T @ X), s2, df)


@dataclass(frozen=True)
class Contrast:
    other: str
    diff: float  # new minus other, in accuracy units
    se: float
    p: float  # two-sided, raw
    p_adjusted: float  # Holm over its family

    @property
    def resolved(self) -> bool:
        return self.p_adjusted < ALPHA


def family(fit: BlockFit, new: str, others: list[str]) -> list[Contrast]:
    """``new`` against each of ``others`` on the block model's residual, Holm over ``others``."""
    raw = {}
    for other in others:
        diff, se = fit.contrast(new, other)
        usable = fit.df >= 2 and se > 0 and not math.isnan(se)
        raw[other] = (diff, se, 2 * stats.t.sf(abs(diff) / se, fit.df) if usable else 1.0)
    adjusted = holm({o: p for o, (_, _, p) in raw.items()})
    return [Contrast(o, *raw[o], adjusted[o]) for o in others]


def why_nothing_resolves(fit: BlockFit) -> str | None:
    """Why no difference can be resolved on this table, or None when some can."""
    if fit.df < 2:
        return f"the block model leaves {fit.df} residual degrees of freedom (fewer than 2): add seeds"
    if not fit.s2 > ROUNDING**2:
        return "the encoding + seed model fits every run exactly: no seed spread to test against"
    return None


@dataclass(frozen=True)
class Screen:
    """The new encoding's seed SD against the pool's: F = s_new² / s_pool² on (df_new, df_pool)."""

    s_new: float
    s_pool: float
    df_new: int
    df_pool: int
    f: float
    p: float

    @property
    def larger(self) -> bool:
        return self.p < ALPHA


def spread_screen(new: list[float], committed: dict[str, list[float]]) -> Screen | None:
    """One-sided F test of the new encoding's seed variance against the committed encodings' pooled
    one-way variance; None with fewer than 2 seeds on either side or a zero pool."""
    with_spread = [v for v in committed.values() if len(v) >= 2]
    df_pool = sum(len(v) - 1 for v in with_spread)
    if len(new) < 2 or df_pool == 0:
        return None
    pool = sum((len(v) - 1) * float(np.var(v, ddof=1)) for v in with_spread) / df_pool
    if pool <= 0:
        return None
    own = float(np.var(new, ddof=1))
    f, df_new = own / pool, len(new) - 1
    return Screen(math.sqrt(own), math.sqrt(pool), df_new, df_pool, f, float(stats.f.sf(f, df_new, df_pool)))


def power(diff: float, sd: float, n: int, k: int, alpha: float = ALPHA) -> float:
    """Power of a two-sided t test of one planned pair at ``n`` seeds each, in a block design of
    ``k`` encodings × ``n`` seeds (residual df (k−1)(n−1)), true difference ``diff``, seed SD ``sd``."""
    df = (k - 1) * (n - 1)
    if df < 1 or sd <= 0:
        return 0.0
    nc = abs(diff) / (sd * math.sqrt(2 / n))
    crit = stats.t.ppf(1 - alpha / 2, df)
    return float(stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc))


def seeds_to_resolve(diff: float, sd: float, k: int, target: float = POWER) -> int | None:
    """The fewest seeds per encoding (at least 2) whose :func:`power` reaches ``target``; None past
    :data:`MAX_SEEDS` (a zero difference never resolves)."""
    if diff == 0 or not sd > 0:
        return None
    low, high = 2, MAX_SEEDS
    if power(diff, sd, high, k) < target:
        return None
    while low < high:  # power grows with n
        mid = (low + high) // 2
        low, high = (mid + 1, high) if power(diff, sd, mid, k) < target else (low, mid)
    return low
