"""The seed-blocked analysis (vitpos/compare/blocked.py), tested where the truth is known:
simulated seed blocks are recovered, the simultaneous intervals cover at their stated rate over
thousands of simulated comparisons of the full comparison's shape (k = 21, n = 3, vectorised),
and a spread of zero resolves nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from vitpos.compare.blocked import (
    contrast_tests,
    critical_differences,
    detectable_difference,
    fit_blocked,
    fit_moderated,
    fit_one_way,
    reference_family,
    seeds_needed,
    tukey_halfwidth,
    tukey_quantile,
    variance_screen,
)
from vitpos.compare.stats import Group, analyse

K, N = 21, 3
LABELS = [f"e{i}" for i in range(K)]


def simulate(rng, sets: int, seed_sd: float, noise: float, k: int = K, n: int = N):
    """``sets`` tables (sets, k, n): true means, a seed effect shared by every row, noise."""
    mu = np.linspace(0.64, 0.75, k)
    block = rng.normal(0, seed_sd, (sets, 1, n))
    return mu, mu[None, :, None] + block + rng.normal(0, noise, (sets, k, n))


def test_a_simulated_seed_block_is_recovered_and_narrows_the_residual():
    rng = np.random.default_rng(3)
    mu, tables = simulate(rng, 1, seed_sd=0.01, noise=0.003)
    blocked, one_way = fit_blocked(tables[0], LABELS), fit_one_way(tables[0], LABELS)
    assert blocked.df == (K - 1) * (N - 1) and one_way.df == K * (N - 1)
    assert blocked.seed_p < 0.001  # the shared seed effect is found
    assert abs(blocked.s - 0.003) < 0.0015  # the residual is the noise, not noise + block
    assert one_way.s > 2 * blocked.s  # without the block, the seed effect counts as noise
    # no block in truth: the F test rejects at about its level (vectorised over 4,000 tables)
    _, null = simulate(rng, 4000, seed_sd=0.0, noise=0.005)
    cols, rows = null.mean(axis=1), null.mean(axis=2)
    grand = null.mean(axis=(1, 2))
    resid = null - rows[:, :, None] - cols[:, None, :] + grand[:, None, None]
    s2 = (resid**2).sum(axis=(1, 2)) / ((K - 1) * (N - 1))
    f = K * ((cols - grand[:, None]) ** 2).sum(axis=1) / (N - 1) / s2
    rate = (stats.f.sf(f, N - 1, (K - 1) * (N - 1)) < 0.05).mean()
    assert abs(rate - 0.05) < 0.015
    # the vectorised statistic is the one fit_blocked computes
    one = fit_blocked(null[0], LABELS)
    assert math.isclose(one.seed_f, f[0]) and math.isclose(one.s**2, s2[0])


def test_tukey_and_planned_intervals_cover_at_95_percent_over_4000_comparisons():
    """4,000 simulated comparisons (k = 21, n = 3, a seed block): Tukey's simultaneous intervals
    cover every true pairwise difference together, and one planned pair's t interval covers its
    difference, each 95 ± 1.5% of the time."""
    rng = np.random.default_rng(7)
    mu, tables = simulate(rng, 4000, seed_sd=0.008, noise=0.006)
    df = (K - 1) * (N - 1)
    rows, cols, grand = tables.mean(axis=2), tables.mean(axis=1), tables.mean(axis=(1, 2))
    resid = tables - rows[:, :, None] - cols[:, None, :] + grand[:, None, None]
    s = np.sqrt((resid**2).sum(axis=(1, 2)) / df)
    err = rows - mu[None, :]  # each mean's error; a difference's error is a difference of these
    widest = err.max(axis=1) - err.min(axis=1)  # the worst pair of each comparison
    half = tukey_halfwidth(1.0, df, N, K) * s
    assert abs((widest <= half).mean() - 0.95) < 0.015
    planned = np.abs(err[:, 0] - err[:, -1]) <= stats.t.ppf(0.975, df) * s * math.sqrt(2 / N)
    assert abs(planned.mean() - 0.95) < 0.015


def test_the_primary_family_has_every_pair_once_and_holm_resolves_only_real_shifts():
    family = reference_family(LABELS, ("e10", "e0"))
    assert len(family) == 2 * (K - 1) - 1 == 39
    assert len({frozenset(p) for p in family}) == 39
    rng = np.random.default_rng(11)
    table = np.full((K, N), 0.70) + rng.normal(0, 0.002, (K, N)) + rng.normal(0, 0.01, (1, N))
    table[5] += 0.03  # one real shift
    result = contrast_tests(fit_blocked(table, LABELS), family)
    resolved = {pair for pair, (_, p) in result.items() if p < 0.05}
    assert resolved == {("e5", "e10"), ("e5", "e0")}
    assert math.isclose(result[("e5", "e0")][0], table[5].mean() - table[0].mean())


def test_zero_spread_or_under_two_degrees_of_freedom_resolves_nothing():
    # two seeds at 100.0 against one seed at 99.8: one degree of freedom, nothing resolved
    result = analyse([Group("sat", 1.0, 0.0, 2), Group("near", 0.998, math.nan, 1)])
    assert not result.resolved("sat", "near") and "degree" in result.refused
    # a one-seed 25.06 does not beat two seeds at 25.0
    result = analyse([Group("lucky", 0.2506, math.nan, 1), Group("chance", 0.25, 0.0, 2)])
    assert not result.resolved("lucky", "chance") and result.letters == {"lucky": "a", "chance": "a"}
    # enough degrees of freedom, but every seed scored the same: zero spread, nothing resolved
    result = analyse([Group("a", 1.0, 0.0, 3), Group("b", 0.998, 0.0, 3)])
    assert result.df == 4 and not result.resolved("a", "b") and "zero" in result.refused
    table = np.array([[1.0, 1.0, 1.0], [0.99, 0.99, 0.99], [0.5, 0.5, 0.5]])
    fit = fit_blocked(table, ["a", "b", "c"])
    assert all(p == 1.0 for _, p in contrast_tests(fit, [("a", "b"), ("a", "c")]).values())
    assert all(math.isnan(v) for v in critical_differences(fit.s, fit.df, 3, 3, 2).values())


def test_critical_differences_shrink_with_seeds_and_order_planned_family_all_pairs():
    s = 0.006
    three = critical_differences(s, 40, 3, K, 39)
    assert three["planned"] < three["family"] < three["all_pairs"]
    assert math.isclose(three["planned"], stats.t.ppf(0.975, 40) * s * math.sqrt(2 / 3))
    assert math.isclose(three["all_pairs"], tukey_quantile(K, 40) * s / math.sqrt(3))
    ten = critical_differences(s, (K - 1) * 9, 10, K, 39)
    assert all(ten[key] < three[key] for key in three)


def test_the_80_percent_difference_is_found_80_percent_of_the_time():
    rng = np.random.default_rng(5)
    s, n, df = 0.006, 3, 40
    delta = detectable_difference(s, df, n)
    assert delta > critical_differences(s, df, n, K, 39)["planned"]
    a = rng.normal(0, s, (20000, n)).mean(axis=1)
    b = rng.normal(delta, s, (20000, n)).mean(axis=1)
    s_hat = s * np.sqrt(rng.chisquare(df, 20000) / df)  # the residual's own sampling spread
    found = np.abs(b - a) / (s_hat * math.sqrt(2 / n)) > stats.t.ppf(0.975, df)
    assert abs(found.mean() - 0.8) < 0.015


def test_seeds_needed_is_the_first_n_that_reaches_the_power():
    n = seeds_needed(0.005, 0.006, K)
    assert n is not None and n > 3
    assert detectable_difference(0.006, (K - 1) * (n - 1), n) <= 0.005
    assert detectable_difference(0.006, (K - 1) * (n - 2), n - 1) > 0.005
    assert seeds_needed(1e-6, 0.006, K, most=20) is None


def test_the_variance_screen_flags_a_noisy_encoding_at_about_its_level():
    f, p = variance_screen(0.02, 3, 0.006, 40)
    assert f == pytest.approx((0.02 / 0.006) ** 2) and p < 0.01
    rng = np.random.default_rng(2)
    draws = rng.normal(0, 0.006, (20000, 3)).std(axis=1, ddof=1)
    pools = 0.006 * np.sqrt(rng.chisquare(40, 20000) / 40)  # the pool is an estimate too
    rate = (stats.f.sf(draws**2 / pools**2, 2, 40) < 0.05).mean()  # the same statistic, vectorised
    assert abs(rate - 0.05) < 0.01
    assert math.isnan(variance_screen(0.02, 1, 0.006, 40)[0])


def test_moderated_variances_shrink_towards_the_pool():
    rng = np.random.default_rng(9)
    _, tables = simulate(rng, 1, seed_sd=0.0, noise=0.006)
    table = tables[0]
    table[3] = table[3].mean() + np.array([-0.03, 0.0, 0.03])  # one noisy encoding
    fit = fit_moderated(table, LABELS)
    own = table.std(axis=1, ddof=1)
    assert fit.df > N - 1  # more degrees of freedom than an encoding's own
    # shrinkage: the spreads scatter less than the encodings' own, and keep their order
    assert np.ptp(np.log(fit.s_by_label)) < np.ptp(np.log(own))
    assert (np.argsort(fit.s_by_label) == np.argsort(own)).all()
    assert fit.s_by_label[3] == fit.s_by_label.max() and fit.s_by_label[3] < own[3]
