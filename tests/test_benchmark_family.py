"""The benchmark's verdict on a new encoding, in its own family, where the truth is known: synthetic
committed tables (encoding effects + seed effects + noise) and a new encoding's accuracies. The
block model recovers what was put in, its intervals cover at their level, the primary and secondary
families are Holm over their own contrasts only, the spread screen fires on a noisy encoding only,
and the seed count it prints reaches the power it claims."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from vitpos.benchmark.family import block_fit, family, power, seeds_to_resolve, spread_screen, why_nothing_resolves
from vitpos.benchmark.minutes import Minutes
from vitpos.benchmark.verdict import verdict_lines
from vitpos.compare.stats import holm

TRUE = {"none": 0.50, "rope_2d": 0.60, "cpe": 0.63, "sincos_2d": 0.58, "learned_2d": 0.55, "alibi_2d": 0.61}
SEED_EFFECT = [0.01, -0.015, 0.005]
MINUTES = Minutes(10.0, 20.0, "estimated from 5.0 min on cpu-avx512bf16", "basis")


def table(rng, noise: float, means: dict = TRUE, seeds: int = 3) -> dict[str, dict[int, float]]:
    return {name: {s: m + SEED_EFFECT[s] + rng.normal(0, noise) for s in range(seeds)} for name, m in means.items()}


def test_the_block_model_recovers_encoding_and_seed_effects_exactly_without_noise():
    fit = block_fit(table(np.random.default_rng(0), 0.0))
    for a, b in [("cpe", "none"), ("rope_2d", "alibi_2d"), ("none", "sincos_2d")]:
        diff, se = fit.contrast(a, b)
        assert diff == pytest.approx(TRUE[a] - TRUE[b], abs=1e-12) and se == pytest.approx(0, abs=1e-9)
    assert fit.df == (len(TRUE) - 1) * (len(SEED_EFFECT) - 1)
    assert "fits every run exactly" in why_nothing_resolves(fit)
    lines = verdict_lines("full", table(np.random.default_rng(0), 0.0), "cpe", MINUTES, "cpu-avx2")
    assert lines[-1].startswith("  nothing is resolved: the encoding + seed model fits every run exactly")


def test_the_seed_block_removes_the_seed_effect_from_a_contrasts_error():
    """With a seed effect much larger than the noise, the block model's residual is the noise's
    variance; a one-way pool over seeds would carry the seed effect as well."""
    rng = np.random.default_rng(1)
    data = table(rng, 0.002)
    fit = block_fit(data)
    one_way = np.mean([np.var(list(v.values()), ddof=1) for v in data.values()])
    assert math.sqrt(fit.s2) < 0.004 < math.sqrt(one_way)


def test_a_block_contrasts_95_percent_interval_covers_the_truth_95_percent_of_the_time():
    """4,000 simulated sets (k = 6, n = 3, seed effects + noise): coverage 95 ± 1.5%."""
    rng = np.random.default_rng(2)
    hits, sets = 0, 4000
    for _ in range(sets):
        fit = block_fit(table(rng, 0.01))
        diff, se = fit.contrast("cpe", "rope_2d")
        half = stats.t.ppf(0.975, fit.df) * se
        hits += abs(diff - (TRUE["cpe"] - TRUE["rope_2d"])) <= half
    assert 0.935 <= hits / sets <= 0.965, hits / sets


def test_the_families_are_holm_over_their_own_contrasts_only():
    data = table(np.random.default_rng(3), 0.004)
    fit = block_fit(data)
    others = [n for n in TRUE if n != "cpe"]
    secondary = family(fit, "cpe", others)
    raw = {c.other: c.p for c in secondary}
    assert {c.other: c.p_adjusted for c in secondary} == pytest.approx(holm(raw))  # Holm over k-1, not k(k-1)/2
    primary = family(fit, "cpe", ["rope_2d", "none"])
    assert {c.other: c.p_adjusted for c in primary} == pytest.approx(holm({o: raw[o] for o in ("rope_2d", "none")}))
    assert {c.other: c.diff for c in primary} == pytest.approx({"rope_2d": 0.03, "none": 0.13}, abs=0.02)


def test_the_verdict_names_the_primary_and_secondary_answers_and_the_seeds_to_resolve():
    """A new encoding as good as rope_2d, well above none: the primary resolves none only; the
    secondary names what it cannot be told from; the nearest neighbour's seed count is printed."""
    rng = np.random.default_rng(4)
    data = table(rng, 0.004)
    data["mine"] = {s: 0.602 + SEED_EFFECT[s] + rng.normal(0, 0.004) for s in range(3)}
    lines = verdict_lines("full", data, "mine", MINUTES, "cpu-avx2")
    text = "\n".join(lines)
    assert lines[0].startswith("full: test/acc ") and "(3 seeds: 0, 1, 2), 95% interval" in lines[0], text
    primary = next(line for line in lines if line.startswith("  primary, against rope_2d and none (Holm over 2)"))
    answers = dict(part.split(" ", 1) for part in primary.split("): ", 1)[1].split("; "))
    assert answers["none"].startswith(("+9.", "+10.")) and answers["none"].endswith(", resolved)"), primary
    assert answers["rope_2d"].endswith(", not resolved)"), primary
    secondary = next(line for line in lines if line.startswith("  secondary, against each of the 6 compared"))
    tied = secondary.split("not distinguishable from: ")[1].split(", ")
    assert "rope_2d" in tied and "none" not in tied and "cpe" not in tied, secondary
    assert "larger than the pool's" not in text  # its spread is the pool's
    resolve = lines[-1]
    assert resolve.startswith("  its nearest neighbour ") and "would be resolved at " in resolve, resolve
    n = int(resolve.split("would be resolved at ")[1].split()[0])
    nearest = resolve.split("its nearest neighbour ")[1].split()[0]
    more = 2 * (n - 3)
    assert f"{more} more runs, about {more * 10:,}-{more * 20:,} CPU minutes on cpu-avx2" in resolve, resolve
    assert nearest in tied


def test_the_spread_screen_fires_on_a_noisy_new_encoding_only():
    rng = np.random.default_rng(5)
    data = table(rng, 0.004)
    committed = {k: list(v.values()) for k, v in data.items()}
    calm = spread_screen([0.60, 0.605, 0.597], committed)
    assert calm is not None and not calm.larger
    noisy = spread_screen([0.55, 0.65, 0.60], committed)
    assert noisy.larger and noisy.df_new == 2 and noisy.df_pool == 2 * len(TRUE)
    assert noisy.f == pytest.approx(np.var([0.55, 0.65, 0.60], ddof=1) / noisy.s_pool**2)
    data["mine"] = {0: 0.55, 1: 0.65, 2: 0.60}
    text = "\n".join(verdict_lines("full", data, "mine", MINUTES, "cpu-avx2"))
    assert "its seed spread ±5.00 is larger than the pool's" in text
    assert "a screen only, with little power at 2 degrees of freedom" in text


def test_the_seed_count_printed_reaches_its_power_and_one_fewer_does_not():
    for diff in (0.003, 0.005, 0.01):
        n = seeds_to_resolve(diff, 0.005, k=21)
        assert power(diff, 0.005, n, 21) >= 0.8 > power(diff, 0.005, n - 1, 21) or n == 2
    # a difference of one seed SD: the normal approximation 2 (1.96 + 0.84)^2 = 15.7, t slightly above
    assert seeds_to_resolve(0.005, 0.005, k=21) in (16, 17)
    assert seeds_to_resolve(0.0, 0.005, k=21) is None
    assert seeds_to_resolve(1e-6, 0.005, k=21) is None  # past 10,000 seeds


def test_the_benchmark_prints_the_verdict_of_its_runs_beside_the_committed_ones(tmp_path, monkeypatch):
    """End to end without training: committed runs of this machine's precision, the new encoding's
    runs answered by a stand-in for ``train``; the verdict is printed and written."""
    from conftest import run_command
    from test_benchmark_plan import committed

    import vitpos.benchmark
    import vitpos.train
    from vitpos import runtime
    from vitpos.run.identity import run_dir

    here = str(runtime.trainer_precision({"precision": "auto"}))
    kind = runtime.machine_kind()
    accs = {"none": [0.50, 0.51], "rope_2d": [0.60, 0.62], "cpe": [0.61, 0.615]}
    results = committed(tmp_path / "results", here, kind, accs)
    new = {0: 0.605, 1: 0.62}

    def train(cfg):
        folder = run_dir(cfg)
        folder.mkdir(parents=True)
        metrics = {"test/acc": new[cfg.seed]}
        (folder / "metrics.json").write_text(json.dumps({"status": "complete", "metrics": metrics}))
        return metrics

    monkeypatch.setattr(vitpos.benchmark, "check_configs", lambda plans: None)
    monkeypatch.setattr(vitpos.train, "train", train)
    ran = run_command("vitpos.benchmark", "encoding=rope_2d_mixed", "protocols=[aspect]", f"results={results}",
                      f"out={tmp_path / 'out'}", cwd=tmp_path)  # fmt: skip
    assert ran.code == 0, ran.out + ran.err
    planned = "aspect: 2 runs (rope_2d_mixed; seeds 0, 1, each paired with the committed seed of its number); against 6"
    assert planned in ran.out
    assert "rope_2d_mixed × 2: about 11 min each (measured, mean of 6 committed runs of others)" in ran.out
    verdict = (tmp_path / "out" / "aspect" / "verdict.txt").read_text()
    assert verdict.startswith("aspect: test/acc 61.25 ± 1.06 (2 seeds: 0, 1), 95% interval"), verdict
    assert verdict in ran.out + "\n"
    assert "primary, against rope_2d and none (Holm over 2)" in verdict
    assert "secondary, against each of the 3 compared encodings (Holm over 3" in verdict
