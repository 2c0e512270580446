"""The Markdown of ``vitpos.compare``: accuracies in percent, one section per
(task, model, budget), extrapolation as one focused table per strategy.

A table never mixes runs whose model or training budget differ: a 2.7M- and a
137k-parameter model, or 1,000 and 45,000 training images, get separate
sections (their numbers are not comparable). Resolutions and lengths are
written as one table per strategy (the encodings' defaults, then
``interpolate``, ``ntk``...), a few columns each, instead of one table with a
column for every (size, strategy) pair.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from vitpos.compare.primary import reading_lines
from vitpos.compare.stats import METHOD, Group, pooled, shares_group, why_unresolvable
from vitpos.metrics import parse_metric
from vitpos.sizes import column_order
from vitpos.tables import markdown_table

HASH = re.compile(r"-[0-9a-f]{6}$")  # the config hash of a run folder name (vitpos.run.identity)
KIND_TITLE = {"res": "resolution (pixels)", "len": "sequence length (tokens)"}


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun`` in the number ``n`` asks for: "1 epoch", "2 epochs", "20,000 runs"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def fmt(mean: float, std: float, seeds: int) -> str:
    """An accuracy as "41.7 ± 1.0 (2)": percent, one decimal, std over seeds (— for one), number of seeds."""
    if mean is None or math.isnan(mean):
        return ""
    spread = f"{100 * std:.1f}" if seeds >= 2 and not math.isnan(std) else "—"
    return f"{100 * mean:.1f} ± {spread} ({seeds})"


def fmt_params(n: float) -> str:
    if n is None or math.isnan(n):
        return ""
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else f"{n:.0f}"


def display_labels(labels: list[str]) -> dict[str, str]:
    """Labels without their config hash (``sincos_2d-3fa9c1`` -> ``sincos_2d``) where that stays unique."""
    short = {label: HASH.sub("", label) for label in labels}
    counts = pd.Series(list(short.values())).value_counts()
    return {label: s if counts[s] == 1 else label for label, s in short.items()}


def _ordered(groups: pd.DataFrame) -> pd.DataFrame:
    if "test/acc_mean" in groups and groups["test/acc_mean"].notna().any():
        return groups.sort_values(["test/acc_mean", "label"], ascending=[False, True], na_position="last")
    return groups.sort_values("label")


def main_table(groups: pd.DataFrame, names: dict[str, str]) -> str:
    """Label, parameters, best val/acc, test/acc (and the raw weights' test/acc beside an EMA's,
    the flip test-time-augmented test/acc beside the plain one, and the minutes of fitting and of
    evaluation, when the runs logged them), best test/acc first."""
    metrics = ("params", "val/acc_best", "test/acc_raw", "test/acc_flip", "time/fit_min", "time/eval_min")
    has = {m: f"{m}_mean" in groups and groups[f"{m}_mean"].notna().any() for m in metrics}
    header = ["label"] + (["params"] if has["params"] else []) + (["val/acc (best)"] if has["val/acc_best"] else [])
    stats = "test/acc_group" in groups and groups["test/acc_group"].notna().any()
    header += ["test/acc"] + (["95% interval", "group"] if stats else [])
    header += ["test/acc (raw weights)"] if has["test/acc_raw"] else []
    header += ["test/acc (flip TTA)"] if has["test/acc_flip"] else []
    header += [c for m, c in (("time/fit_min", "fit min"), ("time/eval_min", "eval min")) if has[m]]
    rows = []
    for _, g in _ordered(groups).iterrows():
        cells = [f"`{names[g['label']]}`"] + ([fmt_params(g["params_mean"])] if has["params"] else [])
        cells += [fmt(g["val/acc_best_mean"], g["val/acc_best_std"], g["seeds"])] if has["val/acc_best"] else []
        cells += [fmt(g.get("test/acc_mean", math.nan), g.get("test/acc_std", math.nan), g["seeds"])]
        cells += [fmt_interval(g["test/acc_ci_low"], g["test/acc_ci_high"]), f"{g['test/acc_group']}"] if stats else []
        for m in ("test/acc_raw", "test/acc_flip"):
            cells += [fmt(g[f"{m}_mean"], g[f"{m}_std"], g["seeds"])] if has[m] else []
        cells += [fmt_minutes(g[f"{m}_mean"]) for m in ("time/fit_min", "time/eval_min") if has[m]]
        rows.append(cells)
    return markdown_table(header, rows)


def fmt_interval(low, high) -> str:
    """A 95% interval in percent, "74.9-75.9"; "one seed" where there is none."""
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return "one seed"
    return f"{100 * low:.1f}–{100 * high:.1f}"


def tied_sentence(groups: pd.DataFrame, names: dict[str, str]) -> list[str]:
    """What the seeds resolve in one section: the labels that share a letter with the best, in a
    sentence, and the method. Nothing when the section has one label or no statistics."""
    if "test/acc_group" not in groups or len(groups) < 2 or groups["test/acc_group"].isna().all():
        return []
    ordered = _ordered(groups)
    best = ordered.iloc[0]
    tied = [f"`{names[r['label']]}`" for _, r in ordered.iloc[1:].iterrows()
            if shares_group(r["test/acc_group"], best["test/acc_group"])]  # fmt: skip
    spread, df = pooled([Group(r["label"], r["test/acc_mean"], r["test/acc_std"] if r["seeds"] >= 2 else math.nan,
                               int(r["seeds"])) for _, r in groups.iterrows()])  # fmt: skip
    method = f"Method: {METHOD}"
    refused = why_unresolvable(spread, df)
    if refused:
        return [f"Nothing is resolved at 95%: {refused}. {method}.", ""]
    head = f"Not distinguishable from the best test/acc (`{names[best['label']]}`) at 95% (all pairs: secondary): "
    what = (
        (", ".join(tied) + f" ({len(tied)} of {len(groups) - 1})")
        if tied
        else "no other encoding (it is resolved from every other)"
    )
    return [
        head + what + ". Rows sharing a letter in **group** are not distinguishable from each other. "
        f"{method}; pooled seed std {100 * spread:.2f} points on {counted(df, 'degree')} of freedom.",
        "",
    ]


def seed_scores(rows: pd.DataFrame, task: str, model: str, budget: str) -> dict[str, dict[int, float]]:
    """{label: {seed: test/acc}} of the complete runs of one section."""
    if "test/acc" not in rows:
        return {}
    done = rows[rows["complete"].astype(bool) & (rows["task"] == task) & (rows["model"] == model)
                & (rows["budget"] == budget)]  # fmt: skip
    scores: dict[str, dict[int, float]] = {}
    for label, seed, value in zip(done["label"], done["seed"], done["test/acc"]):
        if seed is not None and not pd.isna(seed) and value is not None and not pd.isna(value):
            scores.setdefault(label, {})[int(seed)] = float(value)
    return scores


def fmt_minutes(minutes: float) -> str:
    return "" if minutes is None or math.isnan(minutes) else f"{minutes:.1f}"


def strategy_tables(groups: pd.DataFrame, names: dict[str, str], kind: str) -> list[str]:
    """One Markdown table per strategy: rows the labels that have it, columns the sizes (the
    squares by side, then each non-square one, ``16x32``, in a column of its own: :func:`column_order`)."""
    found: dict[str, dict[tuple, str]] = {}  # strategy -> (size order, size name, "" | " (upsampled)") -> column
    for c in groups.columns:
        m = parse_metric(c.removesuffix("_mean")) if c.endswith("_mean") else None
        if m and m.stat == "acc" and m.kind == kind and groups[c].notna().any():
            size = (column_order(m.size), m.size, " (upsampled)" if m.upsampled else "")
            found.setdefault(m.strategy or "", {})[size] = c.removesuffix("_mean")
    parts = []
    for strategy in sorted(found, key=lambda s: (s != "", s)):
        sizes = sorted(found[strategy])
        title = "each encoding's default strategy" if strategy == "" else f"strategy `{strategy}`"
        rows = []
        for _, g in _ordered(groups).iterrows():
            cells = [fmt(g[f"{found[strategy][n]}_mean"], g[f"{found[strategy][n]}_std"], g["seeds"]) for n in sizes]
            if any(cells):
                rows.append([f"`{names[g['label']]}`", *cells])
        parts += [
            f"#### test/acc vs {KIND_TITLE[kind]}: {title}",
            "",
            markdown_table(["label", *(f"{n}{up}" for _, n, up in sizes)], rows),
            "",
        ]
    return parts


def section_title(task: str, model: str, budget: str, plain: bool = False) -> str:
    """A report section's heading; ``plain``: the same words for a plot panel (no Markdown, the
    budget on a line of its own)."""
    head = " · ".join(p for p in (task, (f"model {model}" if plain else f"model `{model}`") if model else "") if p)
    return ("\n" if plain else " · ").join(p for p in (head, budget) if p)


def all_complete(runs: int, lost: list) -> str:
    """The line under "Incomplete, diverged or failed runs" when there are none; ``lost``: the sweep
    jobs that failed before their run folder existed."""
    text = "None: the one run is complete." if runs == 1 else f"None: all {counted(runs, 'run')} are complete."
    if lost:
        text += f" {counted(len(lost), 'sweep job')} failed before {'its' if len(lost) == 1 else 'their'} run folder"
        text += " existed: see below."
    return text


def markdown_report(rows: pd.DataFrame, groups: pd.DataFrame, jobs: list, notes: list[str]) -> str:
    parts = [
        "# Results",
        "",
        "Accuracy in %: mean ± std over the complete seeds (std with ddof=1; — for a single seed), "
        "(n) the number of seeds; the 95% interval and the groups come from the seeds' variance pooled over the "
        "section (vitpos/compare/stats.py). Runs whose model or training budget differ are in separate sections; "
        "a budget names the examples trained on, the validation examples (val) and the epochs.",
    ]
    keys = ["task", "model", "budget"]
    sections = rows[keys].drop_duplicates().sort_values(keys).itertuples(index=False)
    for task, model, budget in sections:
        parts += ["", f"## {section_title(task, model, budget)}", ""]
        sel = groups[(groups["task"] == task) & (groups["model"] == model) & (groups["budget"] == budget)] if len(
            groups) else groups  # fmt: skip
        if not len(sel):
            parts.append("_No complete runs._")
            continue
        names = display_labels(list(sel["label"]))
        parts += [main_table(sel, names), ""] + tied_sentence(sel, names)
        parts += reading_lines(seed_scores(rows, task, model, budget), names, task, model)
        for kind in ("res", "len"):
            parts += strategy_tables(sel, names, kind)
    bad = rows[~rows["complete"].astype(bool)].sort_values(["task", "label", "path"])
    parts += ["", "## Incomplete, diverged or failed runs", ""]
    lost = [j for j in jobs if j.error and j.run is None]
    parts += [f"- `{r.path}`: **{r.status}**: {r.reason}" for r in bad.itertuples()] or [all_complete(len(rows), lost)]
    if jobs:
        failed = [j for j in jobs if j.error]
        parts += ["", "## Sweep jobs (Hydra multirun)", "",
                  f"{counted(len(jobs), 'job')}, {len(failed)} failed" + (":" if failed else ".")]  # fmt: skip
        parts += [""] if failed else []
        parts += [f"- `{j.path}` (`{' '.join(j.overrides)}`): {j.error}" for j in failed]
    return "\n".join(parts + ([""] + notes if notes else []) + [""])
