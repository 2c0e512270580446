"""The benchmark's verdict on the new encoding, as printed lines (:mod:`vitpos.benchmark.family` for the method).

Accuracies are given in points (percent). ``table``: ``{encoding: {seed: test/acc}}`` of the
compared encodings (committed or retrained) and the new one; ``minutes``: one new run's expected
minutes on this machine (:class:`vitpos.benchmark.minutes.Minutes`).
"""

from __future__ import annotations

import math
from statistics import mean, stdev

from scipy import stats

from vitpos.benchmark.family import (
    ALPHA,
    POWER,
    PRIMARY,
    block_fit,
    family,
    seeds_to_resolve,
    spread_screen,
    why_nothing_resolves,
)
from vitpos.benchmark.minutes import Minutes


def pts(x: float) -> str:
    return f"{100 * x:.2f}"


def verdict_lines(protocol: str, table: dict[str, dict[int, float]], new: str, minutes: Minutes, kind: str):
    """The verdict: the new row, the primary and secondary families, the spread screen, the seeds to resolve."""
    mine = table[new]
    values = [mine[s] for s in sorted(mine)]
    n = len(values)
    seeds = ", ".join(map(str, sorted(mine)))
    spread = f" ± {pts(stdev(values))}" if n > 1 else ""
    others = sorted(label for label in table if label != new)
    if not others:
        return [f"{protocol}: test/acc {pts(mean(values))}{spread} ({n} seeds: {seeds}); compared with nothing"]
    fit = block_fit(table)
    blocked = why_nothing_resolves(fit)
    sd = math.sqrt(fit.s2) if fit.s2 == fit.s2 else math.nan
    head = f"{protocol}: test/acc {pts(mean(values))}{spread} ({n} seed{'s' * (n > 1)}: {seeds})"
    if blocked is None:
        half = stats.t.ppf(1 - ALPHA / 2, fit.df) * sd / math.sqrt(n)
        head += (f", 95% interval {pts(mean(values) - half)}-{pts(mean(values) + half)} (residual seed spread "
                 f"±{pts(sd)} of the encoding + seed block model, {fit.df} df)")  # fmt: skip
    lines = [head]
    if blocked is not None:
        return [*lines, f"  nothing is resolved: {blocked}"]
    primary = [p for p in PRIMARY if p in others]
    absent = [p for p in PRIMARY if p not in others and p != new]
    tests = family(fit, new, primary)
    text = "; ".join(f"{c.other} {100 * c.diff:+.2f} points (Holm p {c.p_adjusted:.3f}, "
                     f"{'resolved' if c.resolved else 'not resolved'})" for c in tests)  # fmt: skip
    missing = f"; not compared: {', '.join(absent)} (none of its runs here: add it to baselines=)" * bool(absent)
    lines.append(f"  primary, against {' and '.join(primary) or 'neither rope_2d nor none'} (Holm over "
                 f"{len(primary)}): {text or '-'}{missing}")  # fmt: skip
    secondary = family(fit, new, others)
    tied = [c.other for c in secondary if not c.resolved]
    lines.append(f"  secondary, against each of the {len(others)} compared encodings (Holm over {len(others)}; "
                 f"their own letters stay as committed): resolved from {len(others) - len(tied)} of {len(others)}; "
                 f"not distinguishable from: {', '.join(tied) if tied else 'no other encoding'}")  # fmt: skip
    screen = spread_screen(values, {k: list(v.values()) for k, v in table.items() if k != new})
    if screen is not None and screen.larger:
        lines.append(f"  its seed spread ±{pts(screen.s_new)} is larger than the pool's ±{pts(screen.s_pool)} "
                     f"(F({screen.df_new}, {screen.df_pool}) = {screen.f:.1f}, p = {screen.p:.3f}; a screen only, "
                     f"with little power at {screen.df_new} degrees of freedom): its interval may be too "
                     "narrow")  # fmt: skip
    lines.append("  " + to_resolve(fit, new, secondary, table, minutes, kind, sd))
    return lines


def to_resolve(fit, new: str, secondary: list, table: dict, minutes: Minutes, kind: str, sd: float) -> str:
    """How many seeds would resolve ``new`` from its nearest neighbour, and what they cost here."""
    nearest = min(secondary, key=lambda c: (abs(c.diff), c.other))
    k = len(table)
    n = seeds_to_resolve(nearest.diff, sd, k)
    where = f"its nearest neighbour {nearest.other} ({100 * nearest.diff:+.2f} points)"
    if n is None:
        return f"{where}: not resolved at any seed count up to 10,000 (80% power, one planned pair)"
    runs = max(n - len(table[new]), 0) + max(n - len(table[nearest.other]), 0)
    if minutes.low is None:
        cost = "minutes unknown on this machine"
    else:
        low, high = runs * minutes.low, runs * minutes.high
        span = f"{low:,.0f}" if round(low) == round(high) else f"{low:,.0f}-{high:,.0f}"
        cost = f"about {span} CPU minutes on {kind} ({minutes.how})"
    return (f"{where} would be resolved at {n} seeds each ({POWER:.0%} power, two-sided α {ALPHA}, one planned pair, "
            f"seed spread ±{pts(sd)}): {runs} more runs, {cost}")  # fmt: skip
