"""A committed report as the doc tables read it (scripts/doc_tables.py): the rows of its
``report.csv`` and ``runs.csv``, each report row joined with the training protocol of its
runs, and a row's accuracies by evaluation size and strategy.

The protocol comes as the columns of :class:`vitpos.compare.protocol.Protocol`, read from the
runs snapshot the report was built from (``docs/results/<name>/runs``): ``report.csv`` holds the
protocol only as its ``budget`` sentence, a section key that no table parses. Accuracies are
fractions in the CSVs and in % here.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from vitpos.compare.protocol import Protocol
from vitpos.compare.read import find_runs
from vitpos.compare.report import HASH
from vitpos.compare.summary import KEYS
from vitpos.metrics import parse_metric
from vitpos.sizes import compact, parse_name, size_order

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"


def read_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a report's ``report.csv`` or ``runs.csv``."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_report(folder: Path) -> list[dict]:
    """The rows of ``folder/report.csv``, each with the protocol columns of its runs (found in
    ``folder/runs`` under the same task, model, budget and label)."""
    protocols = {
        (run.task, run.model, run.budget, run.label): run.protocol.columns()
        for run in find_runs(folder / "runs")
        if run.protocol is not None
    }
    rows = read_csv(folder / "report.csv")
    for row in rows:
        key = tuple(row[k] for k in KEYS)
        if key not in protocols:
            raise ValueError(
                f"{folder / 'report.csv'}: no run with a saved config in {folder / 'runs'} for the row "
                f"{row['label']!r}; rebuild the report from its runs (python scripts/rebuild_reports.py)"
            )
        row.update(protocols[key])
    return rows


@dataclass(frozen=True)
class Training:
    """How a report row trained, as the doc tables print it: epochs, train size(s) (``16`` or
    ``16-32``), the smallest of them, the native size, and the size schedule of multi-resolution
    training ("" for sizes drawn per batch). A size is a side, or ``"16x32"`` when not square."""

    epochs: int
    sizes: str
    smallest: int | str
    native: int | str
    multi_resolution: bool
    schedule: str = ""

    def describe(self) -> str:
        return f"{self.sizes} px, {self.epochs} epochs" + (f", {self.schedule}" if self.schedule else "")


def training_of(row: dict) -> Training:
    """The :class:`Training` of a row holding protocol columns; it must train at a size other than
    the native one, or at several, and name both."""
    protocol = Protocol.from_columns(row)
    sizes = protocol.trained_at()
    if protocol.epochs is None or sizes is None or not protocol.native_size:
        raise ValueError(f"report row {row['label']!r}: its protocol names no train size and native size")
    smallest = min(protocol.train_sizes or (protocol.img_size,), key=size_order)
    multi = bool(protocol.train_sizes)
    return Training(protocol.epochs, sizes, smallest, protocol.native_size, multi, protocol.schedule())


def encoding_of(label: str) -> str:
    """``rope_2d-29d7bf`` -> ``rope_2d`` (a run label is the encoding plus a config hash)."""
    return HASH.sub("", label)


def _resolution_means(row: dict[str, str]):
    """(size, upsampled, strategy or None for the default, mean accuracy in %) of every filled
    ``test/acc@res<size>[up][/<strategy>]_mean`` column of one report row; a size is a side, or
    ``"16x32"`` for a non-square one (:func:`vitpos.sizes.compact`)."""
    for column, value in row.items():
        match = parse_metric(column.removesuffix("_mean")) if column.endswith("_mean") and value else None
        if match and match.stat == "acc" and match.kind == "res":
            yield compact(parse_name(match.size)), match.upsampled, match.strategy, 100 * float(value)


def accuracies(row: dict[str, str]) -> dict[tuple[int | str, str | None], float]:
    """{(size, strategy or None for the default): mean test accuracy in %} of one report row."""
    return {(size, strategy): acc for size, _, strategy, acc in _resolution_means(row)}


def sizes_of(rows: list[dict[str, str]]) -> list[tuple[int | str, bool]]:
    """(size, upsampled) of every evaluation size in ``rows``, smallest first (in pixels)."""
    found = {(size, up) for row in rows for size, up, strategy, _ in _resolution_means(row) if not strategy}
    return sorted(found, key=lambda su: (size_order(su[0]), su[1]))


def best_other_strategy(row: dict[str, str], size: int | str) -> tuple[str, float] | None:
    """The non-default strategy with the best accuracy at ``size``, when it beats the default
    there (rounded as printed), else None."""
    acc = accuracies(row)
    others = [(s, a) for (n, s), a in acc.items() if n == size and s is not None]
    if not others or (size, None) not in acc:
        return None
    strategy, value = max(others, key=lambda sa: sa[1])
    return (strategy, value) if round(value, 1) > round(acc[(size, None)], 1) else None
