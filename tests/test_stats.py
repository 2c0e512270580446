"""The comparison's statistics, tested where the truth is known (vitpos/compare/stats.py): seeds
drawn from one distribution are not resolved, a clear shift with small noise is, and the
intervals cover the true value at about the stated rate."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vitpos.compare.stats import Group, analyse, holm, letter_display, pooled


def groups_from(samples: dict[str, np.ndarray]) -> list[Group]:
    return [
        Group(k, float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else math.nan, len(v)) for k, v in samples.items()
    ]


def test_seeds_from_one_distribution_are_not_resolved():
    rng = np.random.default_rng(0)
    result = analyse(groups_from({f"enc{i}": rng.normal(0.72, 0.008, 3) for i in range(19)}))
    assert not any(p < 0.05 for p in result.adjusted_p.values())
    assert set(result.letters.values()) == {"a"} and len(result.tied_with_best) == 19


def test_a_clear_shift_with_small_noise_is_resolved():
    rng = np.random.default_rng(1)
    samples = {"good": rng.normal(0.75, 0.003, 3), "mid": rng.normal(0.72, 0.003, 3), "bad": rng.normal(0.65, 0.003, 3)}
    result = analyse(groups_from(samples))
    assert result.resolved("good", "mid") and result.resolved("mid", "bad") and result.resolved("good", "bad")
    assert result.letters == {"good": "a", "mid": "b", "bad": "c"}
    assert result.tied_with_best == ["good"]


@pytest.mark.parametrize("n_seeds", [2, 3])
def test_the_interval_covers_the_true_mean_and_difference_at_the_stated_rate(n_seeds):
    """5,000 simulated comparisons of 4 encodings: the 95% interval of one encoding covers its true
    mean, and the pairwise test rejects a true null at 5% (before the family correction). Four
    encodings are enough for both properties (the interval pools the variance of all of them, and
    two share a true mean); each comparison's cost grows with the number of pairs."""
    rng = np.random.default_rng(2)
    truth = np.array([0.70, 0.72, 0.72, 0.75])
    covered = false_alarms = 0
    trials = 5000
    for _ in range(trials):
        draws = rng.normal(truth[:, None], 0.01, (len(truth), n_seeds))
        groups = groups_from({f"e{i}": d for i, d in enumerate(draws)})
        result = analyse(groups)
        low, high = result.interval["e0"]
        covered += low <= truth[0] <= high
        s_p, df = pooled(groups)
        from scipy import stats

        t = (groups[1].mean - groups[2].mean) / (s_p * math.sqrt(2 / n_seeds))
        false_alarms += 2 * stats.t.sf(abs(t), df) < 0.05
    assert 0.935 <= covered / trials <= 0.965
    assert 0.035 <= false_alarms / trials <= 0.065


def test_holm_adjusts_step_down_and_stays_monotone():
    adjusted = holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.5})
    assert adjusted == pytest.approx({"a": 0.04, "c": 0.09, "b": 0.09, "d": 0.5})


def test_letters_share_exactly_where_a_difference_is_not_resolved():
    order = ["a1", "a2", "a3", "a4"]
    resolved = {frozenset(p) for p in [("a1", "a3"), ("a1", "a4"), ("a2", "a4")]}
    letters = letter_display(order, resolved)
    for i, x in enumerate(order):
        for y in order[i + 1 :]:
            shares = bool(set(letters[x]) & set(letters[y]))
            assert shares == (frozenset((x, y)) not in resolved), (x, y, letters)
    assert letters["a1"] == "a"


def test_one_seed_gets_no_interval_but_enters_the_tests_through_the_pooled_spread():
    groups = [Group("x", 0.75, 0.002, 3), Group("y", 0.70, 0.002, 3), Group("single", 0.60, math.nan, 1)]
    result = analyse(groups)
    assert result.interval["single"] is None and result.interval["x"] is not None
    assert result.df == 4 and result.resolved("x", "single")


def test_no_spread_anywhere_resolves_nothing():
    result = analyse([Group("x", 0.75, math.nan, 1), Group("y", 0.70, math.nan, 1)])
    assert result.df == 0 and result.letters == {"x": "a", "y": "a"} and not result.resolved("x", "y")


def test_group_codes_past_z_share_only_whole_letters():
    from vitpos.compare.stats import shares_group

    assert shares_group("ab", "bc") and not shares_group("a", "c")
    assert not shares_group("[26]", "[27]") and shares_group("[26][27]", "[27]") and not shares_group("", "a")


def test_an_accuracy_interval_stops_at_zero_and_one():
    """A run at 100% with seed noise elsewhere: the interval of an accuracy (a fraction) is clipped
    to [0, 1], never 98.6-101.4%; the group letters are unchanged."""
    import pandas as pd

    from vitpos.compare.summary import add_statistics

    rows = pd.DataFrame(
        [
            {"task": "t", "model": "m", "budget": "b", "label": "top", "seeds": 2,
             "test/acc_mean": 1.0, "test/acc_std": 0.0},
            {"task": "t", "model": "m", "budget": "b", "label": "floor", "seeds": 2,
             "test/acc_mean": 0.01, "test/acc_std": 0.02},
        ]
    )  # fmt: skip
    out = add_statistics(rows).set_index("label")
    assert out.loc["top", "test/acc_ci_high"] == 1.0 and out.loc["top", "test/acc_ci_low"] < 1.0
    assert out.loc["floor", "test/acc_ci_low"] == 0.0 and out.loc["floor", "test/acc_ci_high"] > 0.0
    assert out.loc["top", "test/acc_group"] != out.loc["floor", "test/acc_group"]
