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

Every input is checked before anything is written, and all is written or nothing: each runs folder's
saved configs must be YAML (scripts/report_inputs.py), the reports are made in a temporary folder,
the leaderboard and the pages are made from them there (each report they quote checked for its
columns and full rows), and only then are the files copied into place.

--into DIR writes each report to DIR/<name>/ instead and leaves docs/ and the pages alone:
tests/test_report_freshness.py rebuilds every snapshot that way and fails when a committed report
differs from what this script makes of its snapshot. Bad arguments are refused before anything is
written: one line, exit code 2.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

if not __package__:  # run as `python scripts/rebuild_reports.py`: import its siblings as `scripts.*`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import leaderboard  # noqa: E402
from scripts.doc_pages import PAGES, RESULTS, ROOT, TABLES, refresh  # noqa: E402
from scripts.report_inputs import check_quoted, check_runs  # noqa: E402
from vitpos.compare import compare  # noqa: E402

#: the reports the pages quote: checked, as staged, before any page is written
QUOTED = {folder for folder, _ in TABLES.values()} | set(leaderboard.SOURCES.values())
USAGE = "usage: python scripts/rebuild_reports.py [--into DIR] [NAME [RUNS_FOLDER]]"


def snapshots() -> dict[str, Path]:
    """Every committed report that has its runs snapshot: name -> docs/results/<name>/runs."""
    return {p.parent.name: p for p in sorted(RESULTS.glob("*/runs")) if p.is_dir()}


def shown(path: Path) -> str:
    """``path`` relative to the checkout when it lies inside it (as the docs write it)."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def rebuild(name: str, source: Path, into: Path, stage: Path) -> Path:
    """The report of the runs in ``source`` made in ``stage/<name>/`` (to be published to ``into/<name>/``),
    with links to what else ``into/<name>/`` holds (its runs snapshot, its README), so the pages read the
    staged folder as they will read the published one; returns the staged folder."""
    out = stage / name
    print(f"rewriting {shown(into / name)}/ from {source} ...", flush=True)
    compare(source, out)
    for entry in sorted((into / name).iterdir()) if (into / name).is_dir() else []:
        if not (out / entry.name).exists():
            (out / entry.name).symlink_to(entry.resolve())
    return out


def staged_view(into: Path, stage: Path) -> None:
    """Links in ``stage`` to every report folder of ``into`` not rebuilt (staged) this time."""
    for folder in sorted(into.iterdir()) if into.is_dir() else []:
        if not (stage / folder.name).exists():
            (stage / folder.name).symlink_to(folder.resolve())


def publish(stage: Path, names: list[str], into: Path) -> None:
    """Copy the staged reports' own files (not the links) into ``into/<name>/``."""
    for name in names:
        (into / name).mkdir(parents=True, exist_ok=True)
        for f in sorted((stage / name).iterdir()):
            if f.is_symlink():
                continue
            if f.is_dir():
                shutil.copytree(f, into / name / f.name, dirs_exist_ok=True)
            else:
                shutil.copy2(f, into / name / f.name)


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


def checked_plan(argv: list[str]) -> tuple[list[tuple[str, Path]], Path]:
    """:func:`plan`, then every input checked that can be before a report is made: each runs folder's
    saved configs, and (writing docs/) every report the pages quote that this run keeps as it is."""
    todo, into = plan(argv)
    for _, source in todo:
        check_runs(source)
    if into.resolve() == RESULTS.resolve():
        check_quoted(into, QUOTED - {name for name, _ in todo})
    return todo, into


def made_pages(into: Path, stage: Path, tmp: Path) -> tuple[Path, dict[Path, str]]:
    """(the leaderboard made in ``tmp``, every page's new text) from the staged reports, each report the
    pages quote checked first."""
    staged_view(into, stage)
    check_quoted(stage, QUOTED)
    return leaderboard.write(stage, into=tmp), {page: refresh(page.read_text(), stage) for page in PAGES}


def write_pages(board: Path, pages: dict[Path, str], into: Path) -> None:
    """Put the leaderboard (page and picture) beside ``into`` and write each page whose text changed."""
    for made in (board, board.with_suffix(".png")):
        shutil.copy2(made, into.parent / made.name)
    print(f"rewrote {shown(into.parent / board.name)} and its picture", flush=True)
    for page, text in pages.items():
        if text != page.read_text():
            page.write_text(text)
            print(f"rewrote the generated tables of {shown(page)}", flush=True)


def main(argv: list[str]) -> int:
    if {"-h", "--help"} & set(argv):
        print(USAGE + "\n\n" + (__doc__ or "").strip())
        return 0
    try:
        todo, into = checked_plan(argv)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    writes_pages = into.resolve() == RESULTS.resolve()  # the pages quote the committed reports only
    with tempfile.TemporaryDirectory(prefix="vitpos-reports-") as tmp:
        stage = Path(tmp) / "results"
        stage.mkdir()
        for name, source in todo:
            try:
                rebuild(name, source, into, stage)
            except FileNotFoundError as err:  # a folder without runs: compare's message says what it expected
                print(f"error: RUNS_FOLDER={source}: {err} (nothing was written)", file=sys.stderr)
                return 2
        try:
            board, pages = made_pages(into, stage, Path(tmp)) if writes_pages else (None, {})
        except (ValueError, KeyError, OSError) as err:
            print(f"error: the pages cannot be made from the reports: {err} (nothing was written)", file=sys.stderr)
            return 2
        publish(stage, [name for name, _ in todo], into)
        if board is not None:
            write_pages(board, pages, into)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
