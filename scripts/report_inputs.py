"""The checks of what scripts/rebuild_reports.py reads, before it writes anything: each refusal is a
:class:`ValueError` holding one line that names the file and the fix.

- a runs folder's saved configs (``hparams.yaml``) must be YAML mappings: a run whose config cannot
  be read would land in a report section with no budget;
- every report the pages quote (scripts/doc_pages.py, scripts/leaderboard.py) must have a
  ``report.csv`` and a ``runs.csv`` with the columns that every report holds, and every row as many
  fields as the header: a truncated file would drop columns from the pages without a word.
"""

from __future__ import annotations

import csv
from pathlib import Path

import yaml

from vitpos.compare.summary import KEYS

#: the columns every report.csv and runs.csv of a trained comparison holds (vitpos/compare/summary.py)
NEEDED = {
    "report.csv": (*KEYS, "seeds"),
    "runs.csv": (*KEYS, "seed", "status", "time/fit_min", "time/eval_min"),
}


def check_runs(source: Path) -> None:
    """Every ``hparams.yaml`` below ``source`` parses as a YAML mapping."""
    for f in sorted(source.rglob("hparams.yaml")):
        try:
            saved = yaml.safe_load(f.read_text())
        except (yaml.YAMLError, ValueError, OSError) as err:  # ValueError: not text
            what = " ".join(str(err).split())[:120] or type(err).__name__
            raise ValueError(f"{f}: not a readable YAML config ({what}); restore it from the run's source") from None
        if not isinstance(saved, dict):
            raise ValueError(f"{f}: holds {type(saved).__name__}, not a saved config; restore it from the run's source")


def check_table(path: Path) -> None:
    """``path`` (a report's ``report.csv`` or ``runs.csv``) exists, has the columns every one holds,
    and a full row under its header for each line."""
    fix = f"rebuild that report first: python scripts/rebuild_reports.py {path.parent.name}"
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            rows = list(reader)
    except (OSError, ValueError, csv.Error) as err:
        raise ValueError(f"{path}: cannot be read ({getattr(err, 'strerror', None) or err}); {fix}") from None
    missing = [c for c in NEEDED.get(path.name, ()) if c not in header]
    if missing:
        raise ValueError(f"{path}: no column {', '.join(missing)} (truncated or not a report's file); {fix}")
    if not rows:
        raise ValueError(f"{path}: a header and no rows; {fix}")
    for line, row in enumerate(rows, 2):
        if None in row or None in row.values():
            more = "more" if None in row else "fewer"
            raise ValueError(f"{path}: line {line} has {more} fields than its header; {fix}")


def check_quoted(results: Path, folders: set[str]) -> None:
    """Each report in ``folders`` under ``results`` (the ones the pages quote) passes :func:`check_table`."""
    for name in sorted(folders):
        for file in NEEDED:
            check_table(results / name / file)
