"""Rebuild a committed report under docs/results/ from runs.

    python scripts/rebuild_reports.py                           # every docs/results/<name>/ with a runs/ snapshot
    python scripts/rebuild_reports.py cifar10_full_13ep         # one, from docs/results/cifar10_full_13ep/runs
    python scripts/rebuild_reports.py recipe_ablation runs/recipe_ablation   # one, from a runs folder
    python scripts/rebuild_reports.py --into /tmp/reports       # rebuild elsewhere: docs/ untouched (a check)

THIS REWRITES TRACKED FILES in docs/results/<name>/ (report.md, report.csv, runs.csv and the
plots), then docs/leaderboard.md and its picture (scripts/leaderboard.py), then the tables that
README.md and docs/*.md quote from the reports (the blocks between
"<!-- generated: ... -->" markers, scripts/doc_pages.py). It is the only command that
writes into docs/: the commands in the README and the docs write their reports under runs/. The
runs come from docs/results/<name>/runs/ (a snapshot written by scripts/snapshot_runs.py) or from
the folder given. Review `git diff docs/results README.md docs` afterwards.

--into DIR writes each report to DIR/<name>/ instead and leaves docs/ and the pages alone:
tests/test_report_freshness.py rebuilds every snapshot that way and fails when a committed report
differs from what this script makes of its snapshot. Bad arguments are refused before anything is
written: one line, exit code 2.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if not __package__:  # run as `python scripts/rebuild_reports.py`: import its siblings as `scripts.*`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import leaderboard  # noqa: E402
from scripts.doc_pages import PAGES, RESULTS, ROOT, refresh_page  # noqa: E402
from vitpos.compare import compare  # noqa: E402

USAGE = "usage: python scripts/rebuild_reports.py [--into DIR] [NAME [RUNS_FOLDER]]"


def snapshots() -> dict[str, Path]:
    """Every committed report that has its runs snapshot: name -> docs/results/<name>/runs."""
    return {p.parent.name: p for p in sorted(RESULTS.glob("*/runs")) if p.is_dir()}


def shown(path: Path) -> str:
    """``path`` relative to the checkout when it lies inside it (as the docs write it)."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def rebuild(name: str, source: Path, into: Path = RESULTS) -> Path:
    """The report of the runs in ``source`` written to ``into/<name>/``; returns that folder."""
    out = into / name
    print(f"rewriting {shown(out)}/ from {source} ...", flush=True)
    compare(source, out)
    return out


def check_into(into: Path, names: list[str]) -> None:
    """``--into DIR``: a folder this process may write, or a path it can make one at, with no file
    where a report's folder ``DIR/<name>`` goes; a :class:`ValueError` holding the one-line refusal
    otherwise (before anything is written, not an ``OSError`` from ``mkdir`` halfway through)."""
    fix = "give a folder to write the reports into, e.g. --into /tmp/reports"
    if into.exists() and not into.is_dir():
        raise ValueError(f"--into: {into} is a file, not a folder ({fix})")
    above = next(p for p in (into, *into.parents) if p.exists())  # the nearest part of the path that exists
    if not above.is_dir():
        raise ValueError(f"--into: {into} lies under the file {above}, not a folder ({fix})")
    if not os.access(above, os.W_OK | os.X_OK):
        raise ValueError(f"--into: {into} cannot be written: {above} is not writable ({fix})")
    for name in names:
        if (into / name).exists() and not (into / name).is_dir():
            raise ValueError(f"--into: {into / name} is a file, not the folder of report {name} ({fix})")


def plan(argv: list[str]) -> tuple[list[tuple[str, Path]], Path]:
    """((name, runs folder) to rebuild, the folder to write into) from the arguments; a
    :class:`ValueError` holding the one-line refusal when they are not usable."""
    into, rest = RESULTS, list(argv)
    if "--into" in rest:
        at = rest.index("--into")
        if at + 1 >= len(rest):
            raise ValueError("--into: no folder given (e.g. --into /tmp/reports)")
        into = Path(rest[at + 1])
        del rest[at : at + 2]
    flags = [a for a in rest if a.startswith("-")]
    found = snapshots()
    if flags:
        raise ValueError(f"{flags[0]}: unknown option ({USAGE.removeprefix('usage: ')}; --help says more)")
    if len(rest) > 2:
        raise ValueError(f"{' '.join(rest)}: too many arguments (give NAME, or NAME RUNS_FOLDER)")
    if len(rest) == 2:
        name, source = rest[0], Path(rest[1])
        if not source.is_dir():
            raise ValueError(
                f"RUNS_FOLDER={source}: no such folder (give the folder the runs are in, e.g. runs/{name})"
            )
        check_into(into, [name])
        return [(name, source)], into
    if len(rest) == 1:
        if rest[0] not in found:
            raise ValueError(
                f"NAME={rest[0]}: no docs/results/{rest[0]}/runs snapshot "
                f"(give a name with one: {', '.join(found)}; or NAME RUNS_FOLDER)"
            )
        check_into(into, [rest[0]])
        return [(rest[0], found[rest[0]])], into
    check_into(into, list(found))
    return list(found.items()), into


def main(argv: list[str]) -> int:
    if {"-h", "--help"} & set(argv):
        print(USAGE + "\n\n" + (__doc__ or "").strip())
        return 0
    try:
        todo, into = plan(argv)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for name, source in todo:
        try:
            rebuild(name, source, into)
        except FileNotFoundError as err:  # a folder without runs: compare's message says what it expected
            print(f"error: RUNS_FOLDER={source}: {err}", file=sys.stderr)
            return 2
    if into.resolve() == RESULTS.resolve():  # the pages quote the committed reports only
        print(f"rewrote {shown(leaderboard.write(RESULTS))} and its picture", flush=True)
        for page in PAGES:
            if refresh_page(page):
                print(f"rewrote the generated tables of {page.relative_to(ROOT)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
