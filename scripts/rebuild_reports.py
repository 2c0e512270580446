"""Rebuild a committed report under docs/results/ from runs.

    python scripts/rebuild_reports.py                           # every docs/results/<name>/ with a runs/ snapshot
    python scripts/rebuild_reports.py cifar10_full_13ep         # one, from docs/results/cifar10_full_13ep/runs
    python scripts/rebuild_reports.py recipe_ablation runs/recipe_ablation   # one, from a runs folder

THIS REWRITES TRACKED FILES in docs/results/<name>/ (report.md, report.csv, runs.csv and the
plots), then the tables that README.md and docs/*.md quote from the reports (the blocks between
"<!-- generated: ... -->" markers, scripts/doc_pages.py). It is the only command that
writes into docs/: the commands in the README and the docs write their reports under runs/. The
runs come from docs/results/<name>/runs/ (a snapshot written by scripts/snapshot_runs.py) or from
the folder given. Review `git diff docs/results README.md docs` afterwards.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run as `python scripts/rebuild_reports.py`: import its siblings as `scripts.*`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.doc_pages import PAGES, RESULTS, ROOT, refresh_page  # noqa: E402
from vitpos.compare import compare  # noqa: E402


def rebuild(name: str, source: Path) -> None:
    out = RESULTS / name
    print(f"rewriting docs/results/{name}/ from {source} ...", flush=True)
    compare(source, out)


def main(argv: list[str]) -> int:
    snapshots = {p.parent.name: p for p in sorted(RESULTS.glob("*/runs")) if p.is_dir()}
    if len(argv) == 2:
        rebuild(argv[0], Path(argv[1]))
    elif len(argv) == 1 and argv[0] in snapshots:
        rebuild(argv[0], snapshots[argv[0]])
    elif not argv:
        for name, source in snapshots.items():
            rebuild(name, source)
    else:
        print(
            f"error: {' '.join(argv)}: give NAME with a snapshot ({', '.join(snapshots)}), or NAME RUNS_FOLDER",
            file=sys.stderr,
        )
        return 2
    for page in PAGES:
        if refresh_page(page):
            print(f"rewrote the generated tables of {page.relative_to(ROOT)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
