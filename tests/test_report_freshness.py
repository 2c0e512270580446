"""Every committed report under docs/results/ is what ``scripts/rebuild_reports.py`` makes of its
runs snapshot today: a change to the report generator (a new column, another rounding) that was
not followed by a rebuild fails here, naming the report and the first differing line.

The script runs as a user runs it (its ``main(argv)``, in process), with ``--into`` a temporary
folder so that docs/ is never written; its plots are not compared (PNG bytes depend on the
matplotlib version). Its refusals are checked too: bad arguments exit 2 with one line before
anything is written."""

from __future__ import annotations

import difflib

import pytest

from scripts import rebuild_reports
from scripts.report_rows import RESULTS

COMPARED = ("report.md", "report.csv", "runs.csv")
SNAPSHOTS = sorted(rebuild_reports.snapshots())


def first_difference(committed: str, rebuilt: str) -> str:
    """The first few differing lines, as a unified diff."""
    diff = difflib.unified_diff(committed.splitlines(), rebuilt.splitlines(), "committed", "rebuilt", lineterm="", n=0)
    return "\n".join(list(diff)[:8])


def test_there_are_snapshots_to_check():
    assert {"cifar10_full", "extrapolation_native"} <= set(SNAPSHOTS), SNAPSHOTS


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_committed_report_matches_its_rebuild(name, tmp_path, capsys):
    assert rebuild_reports.main(["--into", str(tmp_path), name]) == 0
    assert f"rewriting {tmp_path.resolve()}/{name}/ from" in capsys.readouterr().out
    for file in COMPARED:
        committed, rebuilt = (RESULTS / name / file).read_text(), (tmp_path / name / file).read_text()
        assert committed == rebuilt, (
            f"docs/results/{name}/{file} is behind scripts/rebuild_reports.py; run "
            f"`python scripts/rebuild_reports.py {name}` and review `git diff docs`:\n"
            + first_difference(committed, rebuilt)
        )


def test_help_answers_with_help(capsys):
    assert rebuild_reports.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python scripts/rebuild_reports.py") and "--into DIR" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["cifar10_full", "{tmp}/missing"], "error: RUNS_FOLDER={tmp}/missing: no such folder (give the folder"),
        (["cifar10_full", "{tmp}/empty"], "error: RUNS_FOLDER={tmp}/empty: no runs under {tmp}/empty"),
        (["nosuch"], "error: NAME=nosuch: no docs/results/nosuch/runs snapshot (give a name with one: cifar10_full"),
        (["--into"], "error: --into: no folder given"),
        (["--bogus"], "error: --bogus: unknown option"),
        (["a", "b", "c"], "error: a b c: too many arguments"),
    ],
)
def test_bad_arguments_are_refused_in_one_line_before_writing(argv, message, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    before = sorted(p.relative_to(RESULTS) for p in RESULTS.rglob("*"))
    argv = [a.format(tmp=tmp_path) for a in argv]
    argv = argv if "--into" in argv else ["--into", str(tmp_path / "out"), *argv]
    assert rebuild_reports.main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message.format(tmp=tmp_path)), captured.err
    assert "rewriting" not in captured.out or "empty" in argv[-1]  # only a folder that exists is opened
    assert not (tmp_path / "out").exists()
    assert sorted(p.relative_to(RESULTS) for p in RESULTS.rglob("*")) == before
