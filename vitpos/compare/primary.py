"""The report's reading of one section by its seeds: the pre-registered primary analysis (where a
section has one: :data:`PRIMARY`, docs/preregistration.md), the same family over the seeds
present, a sensitivity table that never chooses, and the differences the seeds can resolve.

Every number comes from :mod:`vitpos.compare.blocked`: the two-way (encoding + seed block) model
on a balanced table, the seeds that every encoding of the section has.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from vitpos.compare.blocked import (
    Fit,
    contrast_tests,
    critical_differences,
    detectable_difference,
    fit_blocked,
    fit_moderated,
    fit_one_way,
    reference_family,
    seeds_needed,
    tukey_halfwidth,
)
from vitpos.compare.stats import why_unresolvable
from vitpos.tables import markdown_table


@dataclass(frozen=True)
class Preregistration:
    """A declared primary analysis: the section (its task and model) it reads, the reference
    encodings each encoding is contrasted with, the seeds it uses, its alpha and the page that
    declares it."""

    task: str
    model: str
    references: tuple[str, ...]
    seeds: tuple[int, ...]
    alpha: float
    page: str
    left_out: str  # why the seeds outside ``seeds`` are left out


#: the full comparison's primary analysis, as docs/preregistration.md declares it
PRIMARY = Preregistration(
    task="compare_cifar_full",
    model="vit_cpu_d96",
    references=("rope_2d", "none"),
    seeds=(1, 2, 3),
    alpha=0.05,
    page="docs/preregistration.md",
    left_out="seed 0 of `cpe` is the run that chose the recipe",
)
PLANNED_DIFFERENCE = 0.005  # the difference whose seeds-needed each report prints: half a point


def score_table(scores: dict[str, dict[int, float]], seeds: tuple[int, ...]) -> tuple[list[str], np.ndarray]:
    """(labels, k x n table) of ``scores[label][seed]`` at ``seeds``, labels sorted (reversed,
    the arguments of the fit functions)."""
    labels = sorted(scores)
    return labels, np.array([[scores[label][s] for s in seeds] for label in labels], dtype=float)


def shared_seeds(scores: dict[str, dict[int, float]]) -> tuple[int, ...]:
    """The seeds every label has, in order."""
    common = set.intersection(*(set(v) for v in scores.values())) if scores else set()
    return tuple(sorted(common))


def _points(value: float, signed: bool = False) -> str:
    return "-" if math.isnan(value) else f"{100 * value:+.2f}" if signed else f"{100 * value:.2f}"


def _seed_list(seeds: tuple[int, ...]) -> str:
    return ", ".join(map(str, seeds))


def family_table(fit: Fit, references: tuple[str, ...], names: dict[str, str], alpha: float) -> str:
    """One row per encoding: its difference from each reference in points, with the Holm p over
    the whole family; a resolved difference in bold."""
    tests = contrast_tests(fit, reference_family(list(fit.labels), references))
    order = sorted(fit.labels, key=lambda label: -fit.means[fit.labels.index(label)])
    rows = []
    for label in order:
        cells = [f"`{names.get(label, label)}`", _points(fit.means[fit.labels.index(label)])]
        for ref in references:
            if (label, ref) not in tests and (ref, label) not in tests:
                cells.append("")
                continue
            diff, p = tests[(label, ref)] if (label, ref) in tests else tests[(ref, label)]
            diff = diff if (label, ref) in tests else -diff
            text = f"{_points(diff, signed=True)} ({_p(p)})"
            cells.append(f"**{text}**" if p < alpha else text)
        rows.append(cells)
    header = ["encoding", "mean (%)", *(f"− `{names.get(r, r)}` (points, Holm p)" for r in references)]
    return markdown_table(header, rows)


def power_lines(fit: Fit, family: int | None, alpha: float) -> list[str]:
    """What the seeds of ``fit`` resolve: the critical differences (one planned pair; the primary
    family of ``family`` contrasts where there is one; all pairs) and the difference found with
    80% power, and the seeds a half-point difference needs."""
    k, n = len(fit.labels), fit.n
    refused = why_unresolvable(fit.s, fit.df)
    if refused:
        return [f"Resolving power: none: {refused}."]
    cd = critical_differences(fit.s, fit.df, n, k, family or 1, alpha)
    within = f", {_points(cd['family'])} within the primary family ({family} contrasts, Holm's strictest step)"
    found = "the primary family" if family else "one planned pair"
    power = detectable_difference(fit.s, fit.df, n, alpha / (family or 1))
    needs = [("one planned pair", seeds_needed(PLANNED_DIFFERENCE, fit.s, k, alpha))]
    needs += [("the primary family", seeds_needed(PLANNED_DIFFERENCE, fit.s, k, alpha / family))] if family else []
    need = "; ".join(f"{what}: {count if count else 'over 1,000'}" for what, count in needs)
    return [
        f"Resolving power at {n} seeds ({fit.name}: residual std {_points(fit.s)} points on {fit.df:g} degrees of "
        f"freedom, α = {alpha}): the smallest difference resolved is {_points(cd['planned'])} points for one "
        f"planned pair{within if family else ''} and {_points(cd['all_pairs'])} for all pairs (Tukey); "
        f"{found} finds a true difference of {_points(power)} points with 80% power. Seeds per encoding to find a "
        f"{100 * PLANNED_DIFFERENCE:.1f}-point difference with 80% power: {need}."
    ]


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p {p:.3f}"


def sensitivity(scores: dict[str, dict[int, float]], references: tuple[str, ...], alpha: float,
                primary: tuple[int, ...] | None) -> tuple[str, tuple[str, str] | None]:  # fmt: skip
    """The sensitivity table (each reading's residual, the contrasts of the family and the pairs
    it resolves, how many family verdicts differ from the primary's: fragile ones, and its
    verdict on the best − runner-up pair) and that pair."""
    present = shared_seeds(scores)
    readings = []
    if primary and set(primary) <= set(present):
        readings.append(("primary: two-way, seeds " + _seed_list(primary), fit_blocked, primary))
    readings += [(f"two-way, seeds {_seed_list(present)}", fit_blocked, present)]
    if 0 in present and len(present) > 2:
        rest = tuple(s for s in present if s != 0)
        if not primary or rest != primary:
            readings.append((f"two-way, seeds {_seed_list(rest)}", fit_blocked, rest))
    readings += [(f"one-way pooled, seeds {_seed_list(present)}", fit_one_way, present),
                 (f"moderated (Smyth), seeds {_seed_list(present)}", fit_moderated, present)]  # fmt: skip
    labels, table = score_table(scores, present)
    ranked = sorted(labels, key=lambda label: -table[labels.index(label)].mean())
    pair = (ranked[0], ranked[1]) if len(ranked) > 1 else None
    family = reference_family(labels, tuple(r for r in references if r in labels))
    rows, baseline = [], None
    for name, fit_of, seeds in readings:
        fit = fit_of(*score_table(scores, seeds)[::-1])
        resolved = {c for c, (_, p) in contrast_tests(fit, family).items() if p < alpha}
        if name.startswith("primary"):
            baseline = resolved
        differ = "-" if baseline is None else str(len(resolved ^ baseline))
        all_pairs = contrast_tests(fit, list(combinations(labels, 2)))
        verdict = "-"
        if pair:
            _, p = all_pairs[pair] if pair in all_pairs else all_pairs[pair[::-1]]
            verdict = f"{_p(p)}: " + ("resolved" if p < alpha else "not resolved")
        rows.append([name, _points(fit.s), f"{fit.df:.3g}", f"{len(resolved)} of {len(family)}", differ,
                     f"{sum(p < alpha for _, p in all_pairs.values())} of {len(all_pairs)}", verdict])  # fmt: skip
    header = ["reading", "residual std (points)", "df", "family resolved", "family verdicts ≠ primary",
              "all pairs resolved", "best − runner-up (all pairs, Holm)"]  # fmt: skip
    return markdown_table(header, rows), pair


def pending_line(scores: dict[str, dict[int, float]], plan: Preregistration) -> str | None:
    """Why the primary analysis cannot be computed yet (which seeds are missing where), or None."""
    missing = {seed: [label for label in scores if seed not in scores[label]] for seed in plan.seeds}
    missing = {seed: labels for seed, labels in missing.items() if labels}
    if not missing:
        return None
    what = "; ".join(f"seed {seed} is missing for {len(labels)} of {len(scores)} encodings"
                     for seed, labels in missing.items())  # fmt: skip
    return (
        f"**Pending**: the primary analysis uses seeds {_seed_list(plan.seeds)} of every encoding, and {what}. "
        "It is computed here as soon as they exist."
    )


def headline_pair(fit: Fit, pair: tuple[str, str], shown: dict[str, str], seeds: tuple[int, ...]) -> list[str]:
    """The best − runner-up difference with its Tukey simultaneous interval (secondary)."""
    k = len(fit.labels)
    diff = fit.means[fit.labels.index(pair[0])] - fit.means[fit.labels.index(pair[1])]
    half = tukey_halfwidth(fit.s, fit.df, fit.n, k)
    return [
        f"Headline pair (secondary): `{shown[pair[0]]}` − `{shown[pair[1]]}` = {_points(diff, True)} points, Tukey "
        f"simultaneous 95% interval over all {k * (k - 1) // 2} pairs {_points(diff - half, True)} to "
        f"{_points(diff + half, True)} (seeds {_seed_list(seeds)}).",
        "",
    ]


def primary_lines(scores: dict[str, dict[int, float]], plan: Preregistration, shown: dict[str, str]) -> list[str]:
    """The declared primary analysis of a section, or why it is pending and the same family over
    the seeds present (labelled as not primary), the seed block's F test, the headline pair and
    the sensitivity table."""
    present = shared_seeds(scores)
    labels, table = score_table(scores, present)
    fit = fit_blocked(table, labels)
    by_name = {name: label for label, name in shown.items()}
    references = tuple(by_name[r] for r in plan.references)
    family = len(reference_family(labels, references))
    against = " and ".join(f"`{r}`" for r in plan.references)
    parts = [
        f"### Primary analysis (declared in {plan.page})",
        "",
        f"Each encoding against {against}: {family} contrasts, Holm, α = {plan.alpha}, two-way model (encoding + "
        f"seed block) over seeds {_seed_list(plan.seeds)}.",
        "",
    ]
    pending = pending_line(scores, plan)
    if pending is None:
        primary = fit_blocked(*score_table(scores, plan.seeds)[::-1])
        parts += [family_table(primary, references, shown, plan.alpha), "", *power_lines(primary, family, plan.alpha)]
    else:
        parts += [pending, "", f"#### The same family over seeds {_seed_list(present)}: not the primary analysis", ""]
        parts += [f"Read it as exploratory: {plan.left_out}.", "", family_table(fit, references, shown, plan.alpha)]
        parts += ["", *power_lines(fit, family, plan.alpha)]
    sensitivity_table, pair = sensitivity(scores, references, plan.alpha, plan.seeds)
    seed_p = _p(fit.seed_p).replace("p ", "p = ")
    parts += ["", f"Seed block (seeds {_seed_list(present)}): F({len(present) - 1}, {fit.df:g}) = {fit.seed_f:.2f}, "
              f"{seed_p}.", ""]  # fmt: skip
    if pair and not why_unresolvable(fit.s, fit.df):
        parts += headline_pair(fit, pair, shown, present)
    return parts + ["#### Sensitivity (never chooses)", "", sensitivity_table, ""]


def reading_lines(scores: dict[str, dict[int, float]], names: dict[str, str], task: str, model: str) -> list[str]:
    """The Markdown of one section's seed analysis: :func:`primary_lines` for the section that
    :data:`PRIMARY` declares, and for every other section of three or more encodings with two
    shared seeds its resolving power."""
    scores = {label: seeds for label, seeds in scores.items() if seeds}
    present = shared_seeds(scores)
    if len(scores) < 3 or len(present) < 2:
        return []
    shown = {label: names.get(label, label) for label in scores}
    if (task, model) == (PRIMARY.task, PRIMARY.model) and set(PRIMARY.references) <= set(shown.values()):
        return primary_lines(scores, PRIMARY, shown)
    fit = fit_blocked(*score_table(scores, present)[::-1])
    return ["#### What the seeds resolve", "", *power_lines(fit, None, 0.05), ""]
