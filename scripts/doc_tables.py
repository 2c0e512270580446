"""The Markdown tables the README and the docs quote from committed reports, made from each
report's ``report.csv`` and ``runs.csv`` (and the training protocol of its runs,
scripts/report_rows.py), so that a quoted number can never drift from its source.
scripts/doc_pages.py puts them into the pages.

Accuracies are in %, one decimal; differences are taken between the rounded numbers shown,
so every row adds up as printed.
"""

from __future__ import annotations

from vitpos.compare.primary import reading_lines
from vitpos.compare.protocol import Protocol
from vitpos.compare.stats import shares_group
from vitpos.sizes import size_order
from vitpos.tables import markdown_table

from .report_rows import accuracies, best_other_strategy, encoding_of, sizes_of, training_of


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _change(lo: float | None, hi: float | None) -> str:
    """``hi - lo`` in points, taken between the numbers as printed (one decimal), so a row adds up."""
    return "-" if lo is None or hi is None else f"{round(hi, 1) - round(lo, 1):+.1f}"


def size_header(size: int | str, upsampled: bool, native: int | str) -> str:
    return f"{size} px (up)" if upsampled else f"{size} px (native)" if size == native else f"{size} px"


def native_headline(report: list[dict]) -> str:
    """The README's table of the native protocol (single-size training): accuracy at the train
    size, at the native size with the default and with the best strategy, and at the largest
    upsampled size; best native score first."""
    rows = [r for r in report if not training_of(r).multi_resolution]
    if not rows:
        raise ValueError("the report has no single-size run of the native protocol")
    training = training_of(rows[0])
    largest = sizes_of(rows)[-1][0]  # sizes_of: smallest first, in pixels
    native, small = training.native, training.smallest
    table = []
    for row in rows:
        acc = accuracies(row)
        default = acc.get((native, None))
        best = best_other_strategy(row, native)
        best_text = f"{best[1]:.1f} ({best[0]})" if best else _fmt(default)
        cells = [f"`{encoding_of(row['label'])}`", _fmt(acc.get((small, None))), _fmt(default), best_text]
        table.append((best[1] if best else default or 0.0, [*cells, _fmt(acc.get((largest, None)))]))
    header = [
        "encoding",
        f"{small} px",
        f"{native} px, default strategy",
        f"{native} px, best strategy",
        f"{largest} px (upsampled)",
    ]
    return markdown_table(header, [cells for _, cells in sorted(table, key=lambda t: -t[0])])


def multires_vs_single(report: list[dict]) -> str:
    """docs/extrapolation.md's table: per encoding, single-size training (its default strategy,
    and its best other strategy at the native size where that beats the default) beside
    multi-resolution training, at every evaluation size, with the native - train-size gap.
    Encodings with a multi-resolution run come first, best native score first."""
    sizes = sizes_of(report)
    native = training_of(report[0]).native
    by_encoding: dict[str, list[dict]] = {}
    for row in sorted(report, key=lambda r: training_of(r).multi_resolution):
        by_encoding.setdefault(encoding_of(row["label"]), []).append(row)

    def line(name: str, row: dict, strategy: str | None) -> list[str]:
        training, acc = training_of(row), accuracies(row)
        values = [acc.get((s, strategy), acc.get((s, None)) if s == training.smallest else None) for s, _ in sizes]
        gap = _change(acc.get((training.smallest, None)), acc.get((native, strategy)))
        label = f"`{name}`" + (f" ({strategy})" if strategy else "")
        return [label, training.describe(), *map(_fmt, values), gap]

    def rank(name: str) -> float:
        multi = [accuracies(r).get((native, None)) for r in by_encoding[name] if training_of(r).multi_resolution]
        return -(multi[0] if multi and multi[0] is not None else -1.0)

    table = []
    for name in sorted(by_encoding, key=rank):
        for row in by_encoding[name]:
            table.append(line(name, row, None))
            best = None if training_of(row).multi_resolution else best_other_strategy(row, native)
            if best:
                table.append(line(name, row, best[0]))
    small = min((training_of(r).smallest for r in report), key=size_order)
    header = ["encoding", "training", *(size_header(s, up, native) for s, up in sizes), f"{native} px - {small} px"]
    return markdown_table(header, table)


def aspect_table(report: list[dict]) -> str:
    """docs/extrapolation.md's table of the aspect-ratio protocol: per encoding (default strategy),
    accuracy at the train size, at every non-square size and at the largest square one, then each
    non-square size's change from the train size (taken between the printed numbers). Best mean
    non-square score first."""
    rows = [r for r in report if not training_of(r).multi_resolution]
    if not rows:
        raise ValueError("the report has no single-size run of the aspect-ratio protocol")
    small = training_of(rows[0]).smallest
    sizes = [size for size, up in sizes_of(rows) if not up]
    oblong = [size for size in sizes if isinstance(size, str)]  # "16x32": compact() names non-squares so
    if not oblong:
        raise ValueError(f"the report has no non-square size; its sizes are {sizes}")

    def rank(acc: dict) -> float:
        values = [v for v in (acc.get((s, None)) for s in oblong) if v is not None]
        return -sum(values) / len(values) if values else 0.0

    table = []
    for row, acc in sorted(((r, accuracies(r)) for r in rows), key=lambda ra: rank(ra[1])):
        cells = [_fmt(acc.get((size, None))) for size in sizes]
        changes = [_change(acc.get((small, None)), acc.get((size, None))) for size in oblong]
        table.append([f"`{encoding_of(row['label'])}`", *cells, *changes])
    header = ["encoding", *(f"{size} px" for size in sizes), *(f"{size} - {small} px" for size in oblong)]
    return markdown_table(header, table)


def mean_std(row: dict[str, str], metric: str, seeds: int = 2) -> str:
    """``69.8 ± 0.7``: a report row's mean and std of an accuracy, in %; ``66.4 (1 seed)`` for a
    row of one seed, whose std (written as 0 in report.csv) says nothing about the noise."""
    mean = f"{100 * float(row[metric + '_mean']):.1f}"
    return f"{mean} (1 seed)" if seeds == 1 else f"{mean} ± {100 * float(row[metric + '_std'] or 0):.1f}"


def comparison_headline(report: list[dict[str, str]], runs: list[dict[str, str]]) -> str:
    """The README's headline of a full comparison: per encoding, its position parameters (the
    run's parameters minus those of the ``none`` run of the same model), test and validation
    accuracy (mean ± std over seeds, or "(1 seed)"), the test score's 95% interval and group (rows
    sharing a letter are not distinguishable; every score not distinguishable from the best in
    bold: vitpos/compare/stats.py), the flip
    test-time-augmented score beside the plain one when every row has it (never instead of it),
    and each seed's minutes (fit + evaluation); best test score first. One budget (the report's
    section key) only: two protocols never share a table."""
    budgets = sorted({r["budget"] for r in report})
    if len(budgets) != 1:
        raise ValueError(f"the headline takes one budget; the report has {len(budgets)}: {budgets}")
    complete = [r for r in runs if r.get("status") == "complete"]
    baseline = {float(r["params"]) for r in complete if encoding_of(r["label"]) == "none" and r["params"]}
    best = max(report, key=lambda r: float(r["test/acc_mean"])).get("test/acc_group") or ""
    flip = all(r.get("test/acc_flip_mean") for r in report)  # runs from before flip TTA have none
    table, seed_lists = [], set()
    for row in sorted(report, key=lambda r: -float(r["test/acc_mean"])):
        seeds = sorted((int(r["seed"]), r) for r in complete if r["label"] == row["label"])
        params = {float(r["params"]) for _, r in seeds if r["params"]}
        # one parameter count per encoding and one for `none`, else there is nothing to subtract
        position = f"{int(min(params) - min(baseline)):,}" if len(params) == len(baseline) == 1 else "-"
        minutes = " / ".join(f"{float(r['time/fit_min']) + float(r['time/eval_min']):.1f}" for _, r in seeds)
        test, val = (mean_std(row, m, len(seeds)) for m in ("test/acc", "val/acc_best"))
        group = row.get("test/acc_group") or ""
        test = f"**{test}**" if shares_group(group, best) else test
        low, high = row.get("test/acc_ci_low"), row.get("test/acc_ci_high")
        interval = f"{100 * float(low):.1f}–{100 * float(high):.1f}" if low and high else "one seed"
        seed_lists.add(" / ".join(str(seed) for seed, _ in seeds))
        flipped = [mean_std(row, "test/acc_flip", len(seeds))] if flip else []
        table.append([f"`{encoding_of(row['label'])}`", position, test, interval, group, *flipped, val, minutes])
    header = [
        "encoding",
        "position params",
        "test acc (%)",
        "95% interval",
        "group",
        *(["flip TTA (%)"] if flip else []),
        "val acc (%)",
        "run min (seed " + seed_lists.pop() + ")" if len(seed_lists) == 1 else "run min (by seed)",
    ]
    return markdown_table(header, table)


def comparison_top(report: list[dict[str, str]], runs: list[dict[str, str]], top: int = 5) -> str:
    """The README's short form of :func:`comparison_headline`: its ``top`` best rows and the
    ``none`` row (the floor every position encoding is measured against), with the columns a
    newcomer reads first: test accuracy, its 95% interval and its group."""
    lines = comparison_headline(report, runs).splitlines()
    header, body = lines[:2], lines[2:]
    keep = [*body[:top], *(line for line in body[top:] if line.startswith("| `none` |"))]
    columns = [0, 2, 3, 4]  # encoding, test acc, 95% interval, group

    def cut(line: str) -> str:
        cells = line.strip().strip("|").split("|")
        return "| " + " | ".join(cells[i].strip() for i in columns) + " |"

    return "\n".join(cut(line) for line in [*header, *keep])


def lever_training(row: dict) -> str:
    """A lever row's training: ``12 epochs at 16-32 px (7/3/2)`` (the train sizes when not the
    native one, the epochs per size of a progressive schedule), ``-`` without an epoch count."""
    protocol = Protocol.from_columns(row)
    if protocol.epochs is None:
        return "-"
    sizes, split = protocol.trained_at(), protocol.progressive and protocol.size_epochs
    text = f"{protocol.epochs} epochs" + (f" at {sizes} px" if sizes else "")
    return text + (f" ({'/'.join(map(str, protocol.size_epochs))})" if split else "")


def lever_table(report: list[dict], runs: list[dict[str, str]], base: str = "base") -> str:
    """docs/recipe.md's lever table: one row per change to the recipe (a run label
    ``<lever>-<hash>``), ``base`` first, then **best validation score first**: a lever is chosen
    on the 5,000 held-out training images, never on the test set (a row without a validation
    score goes last). Validation accuracy, test accuracy beside the flip test-time-augmented one
    (never instead of it), the change in test accuracy from ``base`` (taken between the printed
    numbers), and the minutes of every part of the run: fit (compile, training, validation) and
    evaluation (test, flip pass, other sizes). The parameter count comes from ``runs.csv`` (a
    lever may change the model's width)."""
    rows = {encoding_of(r["label"]): r for r in report}
    if base not in rows:
        raise ValueError(f"the lever table needs a {base!r} run to compare with; the report has {sorted(rows)}")

    def mean(row: dict, metric: str, percent: bool = False) -> float | None:
        value = row.get(metric + "_mean")
        return None if not value else round(100 * float(value), 1) if percent else float(value)

    reference = mean(rows[base], "test/acc", percent=True)
    table = []

    def chosen_by(name: str) -> tuple[float, str]:  # validation accuracy, best first; ties by name
        return -(mean(rows[name], "val/acc_best", True) or -1.0), name

    for name in [base, *sorted(set(rows) - {base}, key=chosen_by)]:
        row = rows[name]
        test, fit, evaluation = mean(row, "test/acc", True), mean(row, "time/fit_min"), mean(row, "time/eval_min")
        delta = "" if name == base or test is None or reference is None else f"{test - reference:+.1f}"
        total = None if fit is None or evaluation is None else fit + evaluation
        params = {float(r["params"]) for r in runs if r["label"] == row["label"] and r.get("params")}
        size = f"{params.pop() / 1e6:.2f}M" if len(params) == 1 else "-"
        scores = [_fmt(mean(row, "val/acc_best", True)), _fmt(test), _fmt(mean(row, "test/acc_flip", True)), delta]
        table.append([f"`{name}`", lever_training(row), size, *scores, *map(_fmt, (fit, evaluation, total))])
    header = ["lever", "training", "params", "val acc (%)", "test acc (%)", "flip TTA (%)", f"vs {base}", "fit min",
              "eval min", "run min"]  # fmt: skip
    return markdown_table(header, table)


def seed_reading(runs: list[dict[str, str]]) -> str:
    """The report's seed analysis of a one-section comparison (vitpos/compare/primary.py): the
    declared primary analysis, or why it is pending, with the sensitivity table and the resolving
    power, made from ``runs.csv`` exactly as the report makes it."""
    complete = [r for r in runs if r.get("status") == "complete" and r.get("test/acc")]
    sections = sorted({(r["task"], r["model"], r["budget"]) for r in complete})
    if len(sections) != 1:
        raise ValueError(f"the seed reading takes one section; runs.csv has {len(sections)}")
    scores: dict[str, dict[int, float]] = {}
    for r in complete:
        scores.setdefault(r["label"], {})[int(float(r["seed"]))] = float(r["test/acc"])
    lines = reading_lines(scores, {label: encoding_of(label) for label in scores}, *sections[0][:2])
    return "\n".join(line.replace("### ", "#### ", 1) if line.startswith("### ") else line for line in lines).strip()


def comparison_runs(runs: list[dict[str, str]]) -> str:
    """One sentence of what a comparison holds: its complete runs, and the seeds of each encoding
    (one list when every encoding has the same seeds)."""
    complete = [r for r in runs if r.get("status") == "complete"]
    seeds: dict[str, set[int]] = {}
    for r in complete:
        seeds.setdefault(encoding_of(r["label"]), set()).add(int(float(r["seed"])))
    lists = {" ".join(map(str, sorted(s))) for s in seeds.values()}
    if len(lists) == 1:
        held = f"seeds {', '.join(lists.pop().split())} of each of its {len(seeds)} encodings"
    else:
        held = "; ".join(f"`{name}` seeds {', '.join(map(str, sorted(s)))}" for name, s in sorted(seeds.items()))
    return f"**{len(complete)} complete runs**: {held}."
