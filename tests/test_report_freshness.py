"""Every committed report under docs/results/ is what ``scripts/rebuild_reports.py`` makes of its
runs snapshot today: a change to the report generator (a new column, another rounding) that was
not followed by a rebuild fails here, naming the report and the first differing line.

The script runs as a user runs it (its ``main(argv)``, in process), with ``--into`` a temporary
folder so that docs/ is never written; its plots are not compared (PNG bytes depend on the
matplotlib version). Its refusals are checked too: bad arguments exit 2 with one line before
anything is written."""

from __future__ import annotations

import difflib
import shutil

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


def test_a_runs_folder_with_a_config_that_is_not_yaml_is_refused_before_writing(tmp_path, capsys):
    """A snapshot whose ``hparams.yaml`` is binary bytes would land in a section with no budget."""
    runs = tmp_path / "runs"
    shutil.copytree(RESULTS / "extrapolation_aspect" / "runs", runs)
    broken = sorted(runs.rglob("hparams.yaml"))[0]
    broken.write_bytes(b"\xff\xfe\x00binary")
    assert rebuild_reports.main(["--into", str(tmp_path / "out"), "aspect", str(runs)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {broken}: not a readable YAML config") and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda f: f.write_text(f.read_text()[: len(f.read_text()) // 2]), "fields than its header"),
        (lambda f: f.write_text(f.read_text().split("\n", 1)[0][:40] + "\n"), "no column "),
        (lambda f: f.unlink(), "cannot be read (No such file or directory)"),
    ],
    ids=["truncated-row", "truncated-header", "missing"],
)
def test_a_broken_report_the_pages_quote_is_refused_and_nothing_is_written(damage, message, tmp_path, monkeypatch,
                                                                           capsys):  # fmt: skip
    """Rebuilding one report rewrites the pages from every report: another's broken ``runs.csv`` is refused
    before anything is written (here in a copy of docs/, so the checkout stays as it is)."""
    docs = tmp_path / "docs"
    shutil.copytree(RESULTS, docs / "results", ignore=shutil.ignore_patterns("runs"))
    shutil.copytree(RESULTS / "extrapolation_aspect" / "runs", docs / "results" / "extrapolation_aspect" / "runs")
    page = docs / "results.md"
    shutil.copy2(RESULTS.parent / "results.md", page)
    monkeypatch.setattr(rebuild_reports, "RESULTS", docs / "results")
    monkeypatch.setattr(rebuild_reports, "PAGES", [page])
    damage(docs / "results" / "cifar10_full" / "runs.csv")
    before = {p: p.read_bytes() for p in docs.rglob("*") if p.is_file()}
    assert rebuild_reports.main(["extrapolation_aspect"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith(f"error: {docs / 'results' / 'cifar10_full' / 'runs.csv'}: ") and message in err, err
    assert "python scripts/rebuild_reports.py cifar10_full" in err and len(err.splitlines()) == 1
    assert "rewriting" not in captured.out
    assert {p: p.read_bytes() for p in docs.rglob("*") if p.is_file()} == before
