"""The Markdown tables the README and the docs quote from committed reports, generated
from each report's ``report.csv`` so a quoted number can never drift from its source
(issue 20: "the README tables are generated from it").

A page holds each table between two markers::

    <!-- generated: NAME from docs/results/<report>/report.csv by scripts/rebuild_reports.py -->
    | ... |
    <!-- end generated: NAME -->

``python scripts/rebuild_reports.py`` rewrites every block after rebuilding the reports
(:func:`refresh_page`); ``tests/test_doc_tables.py`` fails when a committed page and the
committed report it quotes disagree. Accuracies are in %, one decimal; differences are
taken between the rounded numbers shown, so every row adds up as printed.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .report import EXTRAP, HASH
from .tables import markdown_table

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
#: the pages that may quote generated tables
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# "cifar10, full train set × 13 epochs[, trained at 16-32 px[, progressive[ 7/3/2]] (native 32)]": the budget
# column of report.csv (vitpos.compare.read.protocol_of)
_BUDGET = re.compile(
    r"× (?P<epochs>\d+) epochs(?:, trained at (?P<sizes>[\d-]+) px"
    r"(?P<progressive>, progressive(?: (?P<split>[\d/]+))?)?(?: \(native (?P<native>\d+)\))?)?"
)


@dataclass(frozen=True)
class Protocol:
    """What a report row's budget says about training: epochs, train sizes, native size, and
    the size schedule of multi-resolution training ("" for sizes drawn per batch)."""

    epochs: int
    train_sizes: str  # "16" or "16-32"
    native: int
    schedule: str = ""  # "", "progressive" or "progressive 5/3/3"

    @property
    def multi_resolution(self) -> bool:
        return "-" in self.train_sizes

    @property
    def smallest(self) -> int:
        return int(self.train_sizes.split("-")[0])

    def describe(self) -> str:
        return f"{self.train_sizes} px, {self.epochs} epochs" + (f", {self.schedule}" if self.schedule else "")


def read_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a report's ``report.csv`` or ``runs.csv``."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def encoding_of(label: str) -> str:
    """``rope_2d-29d7bf`` -> ``rope_2d`` (a run label is the encoding plus a config hash)."""
    return HASH.sub("", label)


def protocol_of(row: dict[str, str]) -> Protocol:
    match = _BUDGET.search(row["budget"])
    if match is None or match["native"] is None:
        raise ValueError(f"report row {row['label']!r}: budget {row['budget']!r} names no train size and native size")
    schedule = (match["progressive"] or "").removeprefix(", ")
    return Protocol(int(match["epochs"]), match["sizes"], int(match["native"]), schedule)


def _resolution_means(row: dict[str, str]):
    """(size, upsampled, strategy or None for the default, mean accuracy in %) of every filled
    ``test/acc@res<size>[up][/<strategy>]_mean`` column of one report row."""
    for column, value in row.items():
        match = EXTRAP.match(column.removesuffix("_mean")) if column.endswith("_mean") and value else None
        if match and match[1] == "res":
            yield int(match[2]), bool(match[3]), match[4], 100 * float(value)


def accuracies(row: dict[str, str]) -> dict[tuple[int, str | None], float]:
    """{(size, strategy or None for the default): mean test accuracy in %} of one report row."""
    return {(size, strategy): acc for size, _, strategy, acc in _resolution_means(row)}


def sizes_of(rows: list[dict[str, str]]) -> list[tuple[int, bool]]:
    """(size, upsampled) of every evaluation size in ``rows``, smallest first."""
    return sorted({(size, up) for row in rows for size, up, strategy, _ in _resolution_means(row) if not strategy})


def size_header(size: int, upsampled: bool, native: int) -> str:
    return f"{size} px (up)" if upsampled else f"{size} px (native)" if size == native else f"{size} px"


def best_other_strategy(row: dict[str, str], size: int) -> tuple[str, float] | None:
    """The non-default strategy with the best accuracy at ``size``, when it beats the default
    there (rounded as printed), else None."""
    acc = accuracies(row)
    others = [(s, a) for (n, s), a in acc.items() if n == size and s is not None]
    if not others or (size, None) not in acc:
        return None
    strategy, value = max(others, key=lambda sa: sa[1])
    return (strategy, value) if round(value, 1) > round(acc[(size, None)], 1) else None


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _rows_of(report: list[dict[str, str]], multi_resolution: bool) -> list[dict[str, str]]:
    return [r for r in report if protocol_of(r).multi_resolution == multi_resolution]


def native_headline(report: list[dict[str, str]]) -> str:
    """The README's table of the native protocol (single-size training): accuracy at the train
    size, at the native size with the default and with the best strategy, and at the largest
    upsampled size; best native score first."""
    rows = _rows_of(report, multi_resolution=False)
    if not rows:
        raise ValueError("the report has no single-size run of the native protocol")
    protocol = protocol_of(rows[0])
    largest = max(s for s, _ in sizes_of(rows))
    native, small = protocol.native, protocol.smallest
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


def multires_vs_single(report: list[dict[str, str]]) -> str:
    """docs/extrapolation.md's table: per encoding, single-size training (its default strategy,
    and its best other strategy at the native size where that beats the default) beside
    multi-resolution training, at every evaluation size, with the native - train-size gap.
    Encodings with a multi-resolution run come first, best native score first."""
    sizes = sizes_of(report)
    native = protocol_of(report[0]).native
    by_encoding: dict[str, list[dict[str, str]]] = {}
    for row in sorted(report, key=lambda r: protocol_of(r).multi_resolution):
        by_encoding.setdefault(encoding_of(row["label"]), []).append(row)

    def line(name: str, row: dict[str, str], strategy: str | None) -> list[str]:
        protocol, acc = protocol_of(row), accuracies(row)
        values = [acc.get((s, strategy), acc.get((s, None)) if s == protocol.smallest else None) for s, _ in sizes]
        lo, hi = acc.get((protocol.smallest, None)), acc.get((native, strategy))
        gap = None if lo is None or hi is None else round(hi, 1) - round(lo, 1)
        label = f"`{name}`" + (f" ({strategy})" if strategy else "")
        return [label, protocol.describe(), *map(_fmt, values), "-" if gap is None else f"{gap:+.1f}"]

    def rank(name: str) -> float:
        multi = [accuracies(r).get((native, None)) for r in by_encoding[name] if protocol_of(r).multi_resolution]
        return -(multi[0] if multi and multi[0] is not None else -1.0)

    table = []
    for name in sorted(by_encoding, key=rank):
        for row in by_encoding[name]:
            table.append(line(name, row, None))
            best = None if protocol_of(row).multi_resolution else best_other_strategy(row, native)
            if best:
                table.append(line(name, row, best[0]))
    small = min(protocol_of(r).smallest for r in report)
    header = ["encoding", "training", *(size_header(s, up, native) for s, up in sizes), f"{native} px - {small} px"]
    return markdown_table(header, table)


def mean_std(row: dict[str, str], metric: str, seeds: int = 2) -> str:
    """``69.8 ± 0.7``: a report row's mean and std of an accuracy, in %; ``66.4 (1 seed)`` for a
    row of one seed, whose std (written as 0 in report.csv) says nothing about the noise."""
    mean = f"{100 * float(row[metric + '_mean']):.1f}"
    return f"{mean} (1 seed)" if seeds == 1 else f"{mean} ± {100 * float(row[metric + '_std'] or 0):.1f}"


def comparison_headline(report: list[dict[str, str]], runs: list[dict[str, str]]) -> str:
    """The README's headline of a full comparison: per encoding, its position parameters (the
    run's parameters minus those of the ``none`` run of the same model), test and validation
    accuracy (mean ± std over seeds, or "(1 seed)"; the best test score in bold), the flip test-time-augmented
    score beside the plain one when every row has it (never instead of it), and each seed's
    minutes (fit + evaluation); best test score first. One budget only: two protocols never
    share a table."""
    budgets = sorted({r["budget"] for r in report})
    if len(budgets) != 1:
        raise ValueError(f"the headline takes one budget; the report has {len(budgets)}: {budgets}")
    complete = [r for r in runs if r.get("status") == "complete"]
    baseline = {float(r["params"]) for r in complete if encoding_of(r["label"]) == "none" and r["params"]}
    best = max(float(r["test/acc_mean"]) for r in report)
    flip = all(r.get("test/acc_flip_mean") for r in report)  # runs from before flip TTA have none
    table, seed_lists = [], set()
    for row in sorted(report, key=lambda r: -float(r["test/acc_mean"])):
        seeds = sorted((int(r["seed"]), r) for r in complete if r["label"] == row["label"])
        params = {float(r["params"]) for _, r in seeds if r["params"]}
        # one parameter count per encoding and one for `none`, else there is nothing to subtract
        position = f"{int(min(params) - min(baseline)):,}" if len(params) == len(baseline) == 1 else "-"
        minutes = " / ".join(f"{float(r['time/fit_min']) + float(r['time/eval_min']):.1f}" for _, r in seeds)
        test, val = (mean_std(row, m, len(seeds)) for m in ("test/acc", "val/acc_best"))
        test = f"**{test}**" if float(row["test/acc_mean"]) == best else test
        seed_lists.add(" / ".join(str(seed) for seed, _ in seeds))
        flipped = [mean_std(row, "test/acc_flip", len(seeds))] if flip else []
        table.append([f"`{encoding_of(row['label'])}`", position, test, *flipped, val, minutes])
    header = [
        "encoding",
        "position params",
        "test acc (%)",
        *(["flip TTA (%)"] if flip else []),
        "val acc (%)",
        "run min (seed " + seed_lists.pop() + ")" if len(seed_lists) == 1 else "run min (by seed)",
    ]
    return markdown_table(header, table)


def lever_table(report: list[dict[str, str]], runs: list[dict[str, str]], base: str = "base") -> str:
    """docs/recipe.md's lever table (issue 21): one row per change to the recipe (a run label
    ``<lever>-<hash>``), ``base`` first, then best test score first. Test accuracy beside the
    flip test-time-augmented one (never instead of it), the change in test accuracy from ``base``
    (taken between the printed numbers), and the minutes of every part of the run: fit (compile,
    training, validation) and evaluation (test, flip pass, other sizes). The parameter count
    comes from ``runs.csv`` (a lever may change the model's width)."""
    rows = {encoding_of(r["label"]): r for r in report}
    if base not in rows:
        raise ValueError(f"the lever table needs a {base!r} run to compare with; the report has {sorted(rows)}")

    def acc(row: dict[str, str], metric: str) -> float | None:
        value = row.get(metric + "_mean")
        return round(100 * float(value), 1) if value else None

    def minutes(row: dict[str, str], metric: str) -> float | None:
        value = row.get(metric + "_mean")
        return float(value) if value else None

    reference = acc(rows[base], "test/acc")
    table = []
    for name in [base, *sorted(set(rows) - {base}, key=lambda n: -(acc(rows[n], "test/acc") or 0.0))]:
        row = rows[name]
        match = _BUDGET.search(row["budget"])
        training = (
            "-"
            if match is None
            else f"{match['epochs']} epochs"
            + (f" at {match['sizes']} px" if match["sizes"] else "")
            + (f" ({match['split']})" if match["split"] else "")
        )
        test, fit, evaluation = acc(row, "test/acc"), minutes(row, "time/fit_min"), minutes(row, "time/eval_min")
        delta = "" if name == base or test is None or reference is None else f"{test - reference:+.1f}"
        total = None if fit is None or evaluation is None else fit + evaluation
        params = {float(r["params"]) for r in runs if r["label"] == row["label"] and r.get("params")}
        table.append(
            [
                f"`{name}`",
                training,
                f"{params.pop() / 1e6:.2f}M" if len(params) == 1 else "-",
                _fmt(test),
                _fmt(acc(row, "test/acc_flip")),
                delta,
                _fmt(fit),
                _fmt(evaluation),
                _fmt(total),
            ]
        )
    header = [
        "lever",
        "training",
        "params",
        "test acc (%)",
        "flip TTA (%)",
        f"vs {base}",
        "fit min",
        "eval min",
        "run min",
    ]
    return markdown_table(header, table)


def _comparison_headline_of(folder: Path) -> str:
    """:func:`comparison_headline` of a committed comparison folder (its report.csv and runs.csv)."""
    return comparison_headline(read_csv(folder / "report.csv"), read_csv(folder / "runs.csv"))


#: NAME -> (the report folder it quotes, the function that turns that folder into the table)
TABLES: dict[str, tuple[str, Callable[[Path], str]]] = {
    "extrapolation_native/headline": (
        "extrapolation_native",
        lambda folder: native_headline(read_csv(folder / "report.csv")),
    ),
    "extrapolation_native/multires": (
        "extrapolation_native",
        lambda folder: multires_vs_single(read_csv(folder / "report.csv")),
    ),
    "cifar10_full/headline": ("cifar10_full", _comparison_headline_of),
    "cifar10_full_e11/headline": ("cifar10_full_e11", _comparison_headline_of),
    "cifar10_full_13ep/headline": ("cifar10_full_13ep", _comparison_headline_of),
    "recipe_levers/levers": (
        "recipe_levers",
        lambda folder: lever_table(read_csv(folder / "report.csv"), read_csv(folder / "runs.csv")),
    ),
    "recipe_levers_bf16/levers": (  # the bf16 levers start from the 11-epoch comparison recipe
        "recipe_levers_bf16",
        lambda folder: lever_table(read_csv(folder / "report.csv"), read_csv(folder / "runs.csv"), "progressive_e11"),
    ),
}

_BLOCK = re.compile(
    r"(?P<open><!-- generated: (?P<name>\S+) [^\n]*-->\n)(?P<body>.*?)(?P<close><!-- end generated: (?P=name) -->)",
    flags=re.S,
)


def generate(name: str, results: Path = RESULTS) -> str:
    if name not in TABLES:
        raise KeyError(f"unknown generated table {name!r}; valid names: {', '.join(TABLES)}")
    folder, make = TABLES[name]
    return make(results / folder)


def blocks(text: str) -> list[tuple[str, str]]:
    """(name, body) of every generated block of a page; an opening marker without its end
    marker is an error."""
    found = [(m["name"], m["body"]) for m in _BLOCK.finditer(text)]
    opened = re.findall(r"<!-- generated: (\S+) ", text)
    if len(opened) != len(found):
        unclosed = sorted(set(opened) - {n for n, _ in found}) or opened
        raise ValueError(f"generated block(s) {unclosed} have no '<!-- end generated: NAME -->' line")
    return found


def refresh(text: str, results: Path = RESULTS) -> str:
    """``text`` with every generated block rewritten from its report."""
    blocks(text)  # checks the markers pair up
    return _BLOCK.sub(lambda m: m["open"] + generate(m["name"], results) + "\n" + m["close"], text)


def refresh_page(path: Path, results: Path = RESULTS) -> bool:
    """Rewrite the generated blocks of one page; True when it changed."""
    old = path.read_text()
    new = refresh(old, results)
    if new != old:
        path.write_text(new)
    return new != old
