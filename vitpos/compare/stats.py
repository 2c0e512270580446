"""Which differences between encodings the seeds resolve: intervals, pairwise tests, tied groups.

The method (named in every report, reasoned in docs/results.md): a **pooled-variance t analysis
over seeds**, the residual of a one-way ANOVA. Each encoding's seeds scatter around its mean; with
two or three seeds an encoding's own standard deviation is a poor estimate (from one or two
degrees of freedom), so the seed variance is pooled over every encoding of the comparison, all
trained with one recipe:

    s_p^2 = sum_i (n_i - 1) s_i^2 / sum_i (n_i - 1),       df = sum_i (n_i - 1)

- an encoding's 95% interval: mean_i ± t(0.975, df) s_p / sqrt(n_i);
- a pair's difference: (mean_i - mean_j) / (s_p sqrt(1/n_i + 1/n_j)) against Student's t(df),
  two-sided; the p values of all k(k-1)/2 pairs are adjusted by Holm's step-down method (which
  holds the family-wise error at 5% without assuming the tests independent);
- what the adjusted tests cannot separate is shown as a **compact letter display**: encodings
  that share a letter are not distinguishable at this budget (Piepho's insert-and-absorb).

A pooled spread of zero (every seed scored the same: runs saturated at 100% or stuck at chance)
or on fewer than 2 degrees of freedom resolves nothing: the analysis says why (``refused``)
instead of calling every difference exact.

An encoding with one seed adds nothing to the pooled variance and gets no interval of its own
(its row says "one seed"); it still enters the pairwise tests through s_p, which describes the
recipe's seed noise, not the encoding's.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from itertools import combinations
from string import ascii_lowercase

from scipy import stats

LEVEL = 0.95
ZERO_SPREAD = 1e-9  # a seed spread below this (accuracy as a fraction) is rounding, not noise
_LETTER = re.compile(r"\[\d+\]|[a-z]")  # one group's letter: a-z, then [26], [27], ...
METHOD = (
    "95% intervals and pairwise t tests with the seed variance pooled over all encodings of the table "
    "(one-way ANOVA residual), Holm-adjusted over all pairs"
)


@dataclass(frozen=True)
class Group:
    """One encoding: its mean, standard deviation over seeds (ddof=1; nan for one seed) and seed count."""

    label: str
    mean: float
    std: float
    n: int


@dataclass(frozen=True)
class Analysis:
    """The pooled analysis of one table: ``interval[label]`` (None for one seed), ``letters[label]``,
    ``tied_with_best`` (labels not distinguishable from the best mean, the best included),
    ``adjusted_p[(a, b)]`` (Holm), the pooled standard deviation with its degrees of freedom, and
    ``refused``: why nothing is resolved, when the spread cannot weigh a difference."""

    pooled_std: float
    df: int
    interval: dict[str, tuple[float, float] | None]
    letters: dict[str, str]
    tied_with_best: list[str]
    adjusted_p: dict[tuple[str, str], float]
    refused: str | None = None  # why nothing is resolved (zero spread, under 2 degrees of freedom)

    def resolved(self, a: str, b: str, alpha: float = 1 - LEVEL) -> bool:
        """Whether the difference of ``a`` and ``b`` is significant after Holm's adjustment."""
        p = self.adjusted_p.get((a, b), self.adjusted_p.get((b, a)))
        return p is not None and p < alpha


def shares_group(a, b) -> bool:
    """Whether two letter codes of :func:`letter_display` (``"ab"``, ``"bc"``; ``"[26]"`` past z)
    share a letter: the one test of "not distinguishable" that every table reads."""
    return bool(set(_LETTER.findall(str(a or ""))) & set(_LETTER.findall(str(b or ""))))


def why_unresolvable(s: float, df: float) -> str | None:
    """Why a residual ``s`` on ``df`` degrees of freedom resolves nothing, or None when it can.
    A zero spread would make every difference exact (p = 0): seeds that all score the same say
    nothing about the noise (runs saturated at 100% or stuck at chance). Under 2 degrees of
    freedom the t quantiles are too wide to mean anything (12.7 at 1)."""
    if df < 2:
        degrees = "degree" if df == 1 else "degrees"
        return f"the seed spread rests on {df:g} {degrees} of freedom (at least 2 needed: more seeds)"
    if not s > ZERO_SPREAD:
        return "the seed spread is zero (every seed scored the same): no difference can be weighed against noise"
    return None


def pooled(groups: list[Group]) -> tuple[float, int]:
    """(s_p, df): the seed standard deviation pooled over ``groups`` (nan, 0 when no group has two seeds)."""
    with_spread = [g for g in groups if g.n >= 2 and not math.isnan(g.std)]
    df = sum(g.n - 1 for g in with_spread)
    if df == 0:
        return math.nan, 0
    return math.sqrt(sum((g.n - 1) * g.std**2 for g in with_spread) / df), df


def holm(p_values: dict) -> dict:
    """Holm's step-down adjustment: the i-th smallest of m p values times (m - i), kept monotone, at most 1."""
    ordered = sorted(p_values.items(), key=lambda kv: kv[1])
    m, running, out = len(ordered), 0.0, {}
    for i, (key, p) in enumerate(ordered):
        running = max(running, min(1.0, (m - i) * p))
        out[key] = running
    return out


def letter_display(order: list[str], resolved_pairs: set[frozenset]) -> dict[str, str]:
    """Compact letters (Piepho 2004, insert-and-absorb): two labels share a letter exactly when
    their difference is not resolved. ``order``: labels best first, so that ``a`` marks the best."""
    groups: list[set[str]] = [set(order)]
    for pair in resolved_pairs:
        a, b = tuple(pair)
        split: list[set[str]] = []
        for g in groups:
            split += [g - {a}, g - {b}] if a in g and b in g else [g]
        groups = [
            g for i, g in enumerate(split) if g and not any(g < h or (g == h and j < i) for j, h in enumerate(split))
        ]
    rank = {label: i for i, label in enumerate(order)}
    groups.sort(key=lambda g: (min(rank[x] for x in g), -len(g)))
    letters = dict.fromkeys(order, "")
    for i, g in enumerate(groups):
        for label in g:
            letters[label] += ascii_lowercase[i] if i < 26 else f"[{i}]"
    return letters


def analyse(groups: list[Group], level: float = LEVEL) -> Analysis:
    """The pooled-variance analysis of ``groups`` (see the module docstring)."""
    groups = [g for g in groups if not math.isnan(g.mean)]
    s_p, df = pooled(groups)
    order = [g.label for g in sorted(groups, key=lambda g: (-g.mean, g.label))]
    refused = why_unresolvable(s_p, df)
    if refused:  # no usable seed spread: nothing can be resolved, and the report says why
        return Analysis(s_p, df, dict.fromkeys(order), dict.fromkeys(order, "a"), order, {}, refused)
    t = stats.t.ppf(0.5 + level / 2, df)
    interval = {g.label: (g.mean - t * s_p / math.sqrt(g.n), g.mean + t * s_p / math.sqrt(g.n)) if g.n >= 2 else None
                for g in groups}  # fmt: skip
    by_label = {g.label: g for g in groups}
    raw = {}
    for a, b in combinations(order, 2):
        ga, gb = by_label[a], by_label[b]
        raw[(a, b)] = 2 * stats.t.sf(abs(ga.mean - gb.mean) / (s_p * math.sqrt(1 / ga.n + 1 / gb.n)), df)
    adjusted = holm(raw)
    alpha = 1 - level
    resolved_pairs = {frozenset(pair) for pair, p in adjusted.items() if p < alpha}
    best = order[0]
    tied = [x for x in order if x == best or frozenset((best, x)) not in resolved_pairs]
    return Analysis(s_p, df, interval, letter_display(order, resolved_pairs), tied, adjusted)
