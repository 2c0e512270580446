"""Reliability, round four: the cases a careful user still hit, each run as the user ran it (``train.py``'s
``main(argv)`` and the tools' mains, in process) and checked for its exit code, its one line, and
what it leaves on disk.

1. another task's ``last.ckpt`` in a run folder, then the advice followed (``resume=true``);
2. ``python -m vitpos.compare out=<a file>``;
4. a finished run asked for a new evaluation size (``eval.resolutions=[16]``);
7. ``run.group=~foo`` (Hydra's grammar);
8. a truncated ``last.ckpt``; ``resume=<a folder>``; ``-m encoding=nosuch1,nosuch2``;
9. a crafted pickle: the refusal must not pass on torch's advice to load it unrestricted.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ckpt_factory import SEQUENCE, make_evil_checkpoint
from conftest import TINY_SHAPES_RUN, compose_train, finished_run, run_command

# a finished image run of a few seconds
IMAGE = [*TINY_SHAPES_RUN, "trainer.max_epochs=1"]
SEQ_RUN = [*SEQUENCE, "trainer.max_epochs=1", "+trainer.limit_train_batches=2", "eval.lengths=[]",
           "task.pictures=false", "trainer.enable_progress_bar=false"]  # fmt: skip


def files_under(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file below ``folder`` with its size and modification time, every folder by name (a lock
    taken and released touches its folder's time): what a command must not change."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else (0, 0)
        for p in folder.rglob("*")
    }


def one_error(ran, *needles: str) -> str:
    """Exit code 2, no traceback, exactly one ``error:`` line, holding every needle."""
    out = ran.out + ran.err
    assert ran.code == 2, out
    assert "Traceback" not in out, out
    errors = [line for line in ran.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, out
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def image_folder(root: Path, *extra: str) -> Path:
    """The run folder ``python train.py IMAGE EXTRA run.root=ROOT`` trains in."""
    from vitpos.run.identity import run_dir

    return run_dir(compose_train(*IMAGE, *extra, f"run.root={root}", "run.model=vit_micro"))


@pytest.fixture(scope="module")
def image_run(tmp_path_factory) -> tuple[Path, Path]:
    """(run.root, run folder) of one finished IMAGE run."""
    root = tmp_path_factory.mktemp("image") / "R"
    return root, finished_run(root, *IMAGE)


@pytest.fixture(scope="module")
def sequence_last(tmp_path_factory) -> Path:
    """The ``last.ckpt`` of a real (one-epoch, two-batch) sequence-task run."""
    root = tmp_path_factory.mktemp("sequence") / "R"
    ran = run_command("train.py", *SEQ_RUN, f"run.root={root}", cwd=root.parent)
    assert ran.code == 0, ran.out + ran.err
    (last,) = root.rglob("last.ckpt")
    return last


# ------------------------------------------------------------------ case 1
@pytest.mark.slow
def test_another_tasks_last_ckpt_then_the_advice_followed(tmp_path, sequence_last):
    """A sequence run's last.ckpt in an image run's folder: resume=auto refuses it without offering
    resume=true (its weights cannot fit), and resume=true, tried anyway, is one line too: no
    size-mismatch traceback, no event file, nothing new on disk."""
    folder = image_folder(tmp_path / "R")
    (folder / "checkpoints").mkdir(parents=True)
    shutil.copy(sequence_last, folder / "checkpoints" / "last.ckpt")
    before = files_under(tmp_path)
    auto = run_command("train.py", *IMAGE, f"run.root={tmp_path / 'R'}", cwd=tmp_path)
    line = one_error(auto, "resume: ", "another task", "task: 'sequence' there, 'classification' now", "delete it")
    assert "resume=true" not in line
    assert files_under(tmp_path) == before
    forced = run_command("train.py", *IMAGE, f"run.root={tmp_path / 'R'}", "resume=true", cwd=tmp_path)
    one_error(forced, "resume: ", str(folder / "checkpoints" / "last.ckpt"), "another task", "run.label=<name>")
    assert files_under(tmp_path) == before  # no event file, no lock left


@pytest.mark.slow
def test_weights_that_do_not_fit_are_refused_before_a_file_is_written(tmp_path):
    """What the config comparison cannot see: the same task, model and encoding (learned_2d) at
    another image size, whose position table has another shape. resume=auto offers resume=true
    (the model is the same); following it gives one line naming the table, not a traceback."""
    small = ["encoding=learned_2d", "data.img_size=16"]
    ran = run_command("train.py", *IMAGE, *small, f"run.root={tmp_path / 'A'}", cwd=tmp_path)
    assert ran.code == 0, ran.out + ran.err
    (last,) = (tmp_path / "A").rglob("last.ckpt")
    folder = image_folder(tmp_path / "R", "encoding=learned_2d")  # data.img_size: 32, the default
    (folder / "checkpoints").mkdir(parents=True)
    shutil.copy(last, folder / "checkpoints" / "last.ckpt")
    before = files_under(tmp_path / "R")
    auto = run_command("train.py", *IMAGE, "encoding=learned_2d", f"run.root={tmp_path / 'R'}", cwd=tmp_path)
    one_error(auto, "another configuration", "data.img_size", "resume=true")
    forced = run_command("train.py", *IMAGE, "encoding=learned_2d", f"run.root={tmp_path / 'R'}", "resume=true",
                         cwd=tmp_path)  # fmt: skip
    one_error(forced, "do not fit this model", "there,", "now")
    assert files_under(tmp_path / "R") == before


# ------------------------------------------------------------------ case 2
def test_compare_out_names_an_existing_file(tmp_path):
    run = tmp_path / "runs" / "shapes" / "vit_micro" / "none-abc123" / "seed0"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text('{"status": "complete", "metrics": {"test/acc": 0.5}}\n')
    report = tmp_path / "report.txt"
    report.write_text("my notes\n")
    before = files_under(tmp_path)
    ran = run_command("vitpos.compare", f"runs={tmp_path / 'runs'}", f"out={report}", cwd=tmp_path)
    one_error(ran, f"out={report}: is a file, not a folder", "pass out=<a folder>")
    assert files_under(tmp_path) == before and report.read_text() == "my notes\n"
    inside = run_command("vitpos.compare", f"runs={tmp_path / 'runs'}", f"out={report}/sub", cwd=tmp_path)
    one_error(inside, f"out={report}/sub: lies inside the file {report}, not a folder", "pass out=<a folder>")
    assert files_under(tmp_path) == before and report.read_text() == "my notes\n"


# ------------------------------------------------------------------ case 4
@pytest.mark.slow
def test_a_finished_run_says_how_to_measure_a_new_size(image_run):
    """Chosen: one line with the command, not an evaluation (why: vitpos/train.py unmeasured_note).
    The stored metrics print, exit 0, nothing is written; the printed command measures it."""
    root, folder = image_run
    before = files_under(root)
    ran = run_command("train.py", *IMAGE, f"run.root={root}", "eval.resolutions=[16]", cwd=root.parent)
    assert ran.code == 0, ran.out + ran.err
    assert "nothing trained" in ran.out and "test/acc " in ran.out
    (note,) = [line for line in ran.out.splitlines() if line.startswith("note: ")]
    assert "test/acc@res16" in note and "never measured" in note, note
    command = note.split("measure it with: ")[1].split()
    assert command[:3] == ["python", "-m", "vitpos.extrapolate"] and "resolutions=[16]" in command, note
    assert files_under(root) == before
    measured = run_command("vitpos.extrapolate", *command[3:], "device=cpu", cwd=root.parent)
    assert measured.code == 0 and "16" in measured.out, measured.out + measured.err
    unchanged = run_command("train.py", *IMAGE, f"run.root={root}", cwd=root.parent)  # nothing asked: no note
    assert unchanged.code == 0 and "note: " not in unchanged.out


# ------------------------------------------------------------------ case 7
def test_a_value_hydra_cannot_parse_gets_a_quoting_hint(tmp_path):
    ran = run_command("train.py", "data=shapes", "run.group=~foo", f"run.root={tmp_path / 'R'}", cwd=tmp_path)
    line = one_error(ran, "run.group: ", "'~foo'", "\"run.group='~foo'\"")
    assert "LexerNoViableAltException" not in line
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ case 8
@pytest.mark.slow
def test_a_truncated_last_ckpt_says_what_to_do(tmp_path, image_run):
    _, done = image_run
    good = (done / "checkpoints" / "last.ckpt").read_bytes()
    folder = image_folder(tmp_path / "R", "seed=1")
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "last.ckpt").write_bytes(good[: len(good) // 2])
    before = files_under(tmp_path)
    ran = run_command("train.py", *IMAGE, "seed=1", f"run.root={tmp_path / 'R'}", cwd=tmp_path)
    one_error(ran, "resume: ", "not a readable checkpoint", "delete it", "resume=false run.label=<name>")
    assert files_under(tmp_path) == before


@pytest.mark.slow
def test_resume_names_a_folder(tmp_path, image_run):
    root, folder = image_run
    ran = run_command("train.py", *IMAGE, f"run.root={tmp_path / 'R'}", f"resume={folder}", cwd=tmp_path)
    one_error(ran, f"resume: {folder} is a folder, not a checkpoint file", f"resume={folder}/checkpoints/last.ckpt")
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_over_unknown_encodings_is_one_line(tmp_path):
    ran = run_command("train.py", "-m", "data=shapes", "encoding=nosuch1,nosuch2", "run.root=R", cwd=tmp_path)
    one_error(ran, "encoding: no encoding 'nosuch1'", "valid: ")
    assert list(tmp_path.iterdir()) == [], "multirun.yaml or a run folder was written"


def test_a_sweep_refuses_the_job_that_does_not_compose(tmp_path):
    """Not only the first job: the second value of the sweep is the unknown one."""
    ran = run_command("train.py", "-m", "data=shapes", "encoding=rope_2d,nosuch2", "run.root=R", cwd=tmp_path)
    one_error(ran, "no encoding 'nosuch2'")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ case 9
@pytest.mark.parametrize("tool", ["train.py", "vitpos.extrapolate"])
def test_a_crafted_pickle_is_refused_without_the_unsafe_advice(tmp_path, tool):
    evil = make_evil_checkpoint(tmp_path / "evil", tmp_path / "pwned")
    args = ["data=shapes", f"resume={evil}", f"run.root={tmp_path / 'R'}"] if tool == "train.py" else [f"ckpt={evil}"]
    ran = run_command(tool, *args, cwd=tmp_path)
    line = one_error(ran, str(evil), "GLOBAL posix.system", "Do NOT load it with weights_only=False")
    assert "Re-running" not in line and "will likely succeed" not in line
    assert not (tmp_path / "pwned").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil"]
