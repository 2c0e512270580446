"""The seed-blocked analysis of a comparison, and what its seeds can resolve.

At seed k every encoding of a comparison sees the same batch order and the same crop and flip
draws, and most start from the same initial weights: a seed that is lucky for one encoding tends
to be lucky for all. The seeds are therefore a **block**, and the analysis is a two-way analysis
of variance without interaction (Montgomery, *Design and Analysis of Experiments*, ch. 4)::

    y[i, s] = mu + encoding[i] + seed[s] + e[i, s],   e ~ N(0, sigma^2)

on a balanced table (every encoding at the same n seeds). Its residual mean square s^2 has
(k - 1)(n - 1) degrees of freedom; a contrast of two encoding means has standard error
s sqrt(2 / n). The public functions below are the primitives every family is built from:

- :func:`fit_blocked` (the block model), :func:`fit_one_way` (no block) and
  :func:`fit_moderated` (Smyth's empirical-Bayes variances: sensitivity only);
- :func:`contrast_tests` over any family of pairs, Holm-adjusted (:func:`vitpos.compare.stats.holm`);
  :func:`reference_family` (each label against each reference, each pair once);
- :func:`tukey_halfwidth` (simultaneous intervals over all pairs), :func:`critical_differences`,
  :func:`detectable_difference` (80% power), :func:`seeds_needed`;
- :func:`variance_screen` (an F screen of one encoding's seed spread against the pool);
- :func:`why_unresolvable`: a zero residual variance, or fewer than 2 degrees of freedom,
  resolves nothing (every p value would be 0 or undefined), and says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import optimize, special, stats

from vitpos.compare.stats import holm, why_unresolvable

ALPHA = 0.05


@dataclass(frozen=True)
class Fit:
    """One model's reading of a table: ``labels``, their means, the residual standard deviation
    ``s`` on ``df`` degrees of freedom, the seeds per label ``n``; ``s_by_label`` only for the
    moderated fit (each label's own shrunken s, with ``df`` its posterior degrees of freedom);
    the seed block's F test (``seed_f``, ``seed_p``) only for the blocked fit."""

    name: str
    labels: tuple[str, ...]
    means: np.ndarray
    s: float
    df: float
    n: int
    s_by_label: np.ndarray | None = None
    seed_f: float = math.nan
    seed_p: float = math.nan

    def se(self, a: str, b: str) -> float:
        """The standard error of mean(a) - mean(b)."""
        if self.s_by_label is None:
            return self.s * math.sqrt(2 / self.n)
        i, j = self.labels.index(a), self.labels.index(b)
        return math.sqrt((self.s_by_label[i] ** 2 + self.s_by_label[j] ** 2) / self.n)


def fit_blocked(table: np.ndarray, labels: list[str]) -> Fit:
    """The two-way (encoding + seed) fit of ``table`` (k labels x n seeds, balanced)."""
    k, n = table.shape
    grand, rows, cols = table.mean(), table.mean(axis=1), table.mean(axis=0)
    residual = table - rows[:, None] - cols[None, :] + grand
    df = (k - 1) * (n - 1)
    s2 = float((residual**2).sum() / df) if df else math.nan
    seed_ms = k * float(((cols - grand) ** 2).sum()) / (n - 1) if n > 1 else math.nan
    f = seed_ms / s2 if df and s2 > 0 else math.nan
    p = float(stats.f.sf(f, n - 1, df)) if not math.isnan(f) else math.nan
    return Fit("two-way (encoding + seed block)", tuple(labels), rows, math.sqrt(s2) if df else math.nan, df, n,
               seed_f=f, seed_p=p)  # fmt: skip


def fit_one_way(table: np.ndarray, labels: list[str]) -> Fit:
    """The pooled one-way fit (no seed block): residual on k(n - 1) degrees of freedom."""
    k, n = table.shape
    df = k * (n - 1)
    s2 = float(table.var(axis=1, ddof=1).mean()) if n > 1 else math.nan
    return Fit("one-way (pooled, no block)", tuple(labels), table.mean(axis=1), math.sqrt(s2), df, n)


def _trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x (Newton's method on 1/y, as Smyth 2004 does)."""
    y = 0.5 + 1 / x if x < 1e6 else 1 / math.sqrt(x)
    for _ in range(50):
        tri = float(special.polygamma(1, y))
        step = tri * (1 - tri / x) / float(special.polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y


def fit_moderated(table: np.ndarray, labels: list[str]) -> Fit:
    """Smyth's (2004) moderated variances: each label's own variance on d = n - 1 degrees of
    freedom shrunk towards a prior s0^2 on d0 degrees of freedom, both estimated from the spread
    of the log variances; posterior s_i^2 = (d0 s0^2 + d s_i^2) / (d0 + d) on d0 + d degrees of
    freedom. A sensitivity reading: it lets a noisy encoding keep a wider error."""
    k, n = table.shape
    d = n - 1
    own = table.var(axis=1, ddof=1)
    own = np.maximum(own, 1e-8 * max(float(np.median(own)), 1e-12))  # a zero variance has no logarithm
    e = np.log(own) - special.digamma(d / 2) + math.log(d / 2)
    excess = float(e.var(ddof=1)) - float(special.polygamma(1, d / 2))
    if excess > 0:
        d0 = 2 * _trigamma_inverse(excess)
        s0 = math.exp(float(e.mean()) + special.digamma(d0 / 2) - math.log(d0 / 2))
        post = (d0 * s0 + d * own) / (d0 + d)
    else:  # the variances scatter no more than chance: they are one variance
        d0, post = math.inf, np.full(k, math.exp(float(e.mean())))
    df = min(d0 + d, k * d)  # never more than the pool itself has
    return Fit("moderated (Smyth empirical Bayes)", tuple(labels), table.mean(axis=1), float(np.sqrt(post.mean())),
               df, n, s_by_label=np.sqrt(post))  # fmt: skip


def reference_family(labels: list[str], references: tuple[str, ...]) -> list[tuple[str, str]]:
    """Each label against each reference, every unordered pair once (with k labels and two
    references present: 2(k - 1) - 1 contrasts)."""
    seen, out = set(), []
    for ref in references:
        for label in labels:
            if label != ref and frozenset((label, ref)) not in seen:
                seen.add(frozenset((label, ref)))
                out.append((label, ref))
    return out


def contrast_tests(fit: Fit, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], tuple[float, float]]:
    """(difference a - b, Holm-adjusted two-sided p over ``pairs``) of every pair; every p is 1
    when :func:`why_unresolvable` refuses the fit."""
    index = {label: i for i, label in enumerate(fit.labels)}
    diffs = {(a, b): float(fit.means[index[a]] - fit.means[index[b]]) for a, b in pairs}
    if why_unresolvable(fit.s, fit.df):
        return {pair: (diff, 1.0) for pair, diff in diffs.items()}
    raw = {pair: float(2 * stats.t.sf(abs(diff) / fit.se(*pair), fit.df)) for pair, diff in diffs.items()}
    adjusted = holm(raw)
    return {pair: (diffs[pair], adjusted[pair]) for pair in pairs}


@lru_cache(maxsize=64)
def tukey_quantile(k: int, df: float, level: float = 1 - ALPHA) -> float:
    """The studentized range quantile q(level; k, df) (cached: each costs most of a second)."""
    return float(stats.studentized_range.ppf(level, k, df))


def tukey_halfwidth(s: float, df: float, n: int, k: int, level: float = 1 - ALPHA) -> float:
    """Half the width of Tukey's simultaneous interval for any difference of two means of n seeds
    among k: q s / sqrt(n); all k(k-1)/2 intervals hold together with probability ``level``."""
    return tukey_quantile(k, df, level) * s / math.sqrt(n)


def critical_differences(s: float, df: float, n: int, k: int, family: int, alpha: float = ALPHA) -> dict[str, float]:
    """The smallest difference of two means of ``n`` seeds that is resolved at ``alpha``:
    ``planned`` (one pair, t), ``family`` (the strictest step of Holm over ``family`` contrasts:
    Bonferroni), ``all_pairs`` (Tukey over the k(k-1)/2 pairs). nan where nothing resolves."""
    if why_unresolvable(s, df):
        return dict.fromkeys(("planned", "family", "all_pairs"), math.nan)
    se = s * math.sqrt(2 / n)
    return {
        "planned": float(stats.t.ppf(1 - alpha / 2, df)) * se,
        "family": float(stats.t.ppf(1 - alpha / (2 * family), df)) * se,
        "all_pairs": tukey_halfwidth(s, df, n, k, 1 - alpha),
    }


def detectable_difference(s: float, df: float, n: int, alpha: float = ALPHA, power: float = 0.8) -> float:
    """The true difference of two means of ``n`` seeds that a two-sided t test at ``alpha`` (per
    test: pass alpha / m for a Bonferroni family of m) finds with probability ``power`` (noncentral t)."""
    if why_unresolvable(s, df):
        return math.nan
    se, crit = s * math.sqrt(2 / n), float(stats.t.ppf(1 - alpha / 2, df))

    def shortfall(delta: float) -> float:
        ncp = delta / se  # the far tail P(T < -crit) as P(T > crit) at -ncp: scipy's cdf can return nan there
        tails = np.nan_to_num([stats.nct.sf(crit, df, ncp), stats.nct.sf(crit, df, -ncp)])
        return float(tails.sum()) - power

    return float(optimize.brentq(shortfall, 0.0, (crit + 8) * se))  # at ncp = crit + 8 the power is ~1


def seeds_needed(difference: float, s: float, k: int, alpha: float = ALPHA, power: float = 0.8,
                 most: int = 1000) -> int | None:  # fmt: skip
    """The fewest seeds per encoding (blocked design of ``k`` encodings: (k-1)(n-1) degrees of
    freedom) at which a true ``difference`` is found with ``power`` at ``alpha`` per test; None
    past ``most``."""
    for n in range(2, most + 1):
        if detectable_difference(s, (k - 1) * (n - 1), n, alpha, power) <= abs(difference):
            return n
    return None


def variance_screen(std: float, n: int, pooled_s: float, pooled_df: float) -> tuple[float, float]:
    """(F, one-sided p) of one encoding's seed variance (``n`` seeds) against the pool: a screen,
    with little power at n - 1 = 2 degrees of freedom; a small p says its seeds spread more than
    the pool's, so the pooled interval understates its noise."""
    if n < 2 or why_unresolvable(pooled_s, pooled_df):
        return math.nan, math.nan
    f = std**2 / pooled_s**2
    return f, float(stats.f.sf(f, n - 1, pooled_df))
