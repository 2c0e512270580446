"""A run folder's identity, lock and sweeps.

- What a run trained on is part of its identity: the data set's fingerprint,
  not the path string (the same data moved keeps the run; other data is
  another run, and resume=auto refuses a checkpoint trained on it).
- A run folder is locked while a run is in it; a lock left by a dead process
  is taken over.
- A sweep goes on past a failed job, records its error line, and exits non-zero.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_command
from omegaconf import OmegaConf
from test_bad_input import TINY, assert_user_error, small_imagefolder

from vitpos.errors import UserError
from vitpos.run import folder as run_folder
from vitpos.run.identity import config_hash, identity


def image_cfg(root: Path) -> OmegaConf:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(str(ROOT / "configs"), version_base="1.3"):
        return compose("train", overrides=["data.format=imagefolder", f"data.root={root}", "run.model=vit_cpu"])


def test_same_data_moved_keeps_the_run_other_data_does_not(tmp_path):
    a = small_imagefolder(tmp_path / "a", per_class=2)
    moved = tmp_path / "elsewhere" / "copy"
    shutil.copytree(a, moved)
    other = tmp_path / "other"
    shutil.copytree(a, other)
    (other / "train" / "cat" / "0.png").write_bytes(b"\x89PNG" + b"0" * 10)  # one file of another size
    assert config_hash(image_cfg(a)) == config_hash(image_cfg(moved))
    assert config_hash(image_cfg(a)) != config_hash(image_cfg(other))
    assert identity(image_cfg(a))["data"]["fingerprint"] != identity(image_cfg(other))["data"]["fingerprint"]
    assert "root" not in identity(image_cfg(a))["data"]  # where it lies does not define the run


def test_resume_auto_refuses_a_checkpoint_trained_on_other_data(tmp_path):
    from vitpos.run.plan import config_differences

    a = small_imagefolder(tmp_path / "a", per_class=2)
    other = tmp_path / "other"
    shutil.copytree(a, other)
    (other / "test" / "dog" / "1.png").unlink()
    diffs = config_differences(identity(image_cfg(a)), identity(image_cfg(other)))
    assert len(diffs) == 1 and diffs[0].startswith("data.fingerprint:"), diffs


def test_generated_data_has_no_fingerprint():
    from vitpos.data.fingerprint import data_fingerprint

    assert data_fingerprint({"name": "shapes", "num_train": 10}) is None
    assert data_fingerprint({"name": "cifar10", "format": "torchvision", "root": "/nowhere"}) == "cifar10-official"


def test_lock_refuses_a_live_holder_and_takes_over_a_dead_ones(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        run_folder.atomic_write_text(
            tmp_path / run_folder.LOCK, f'{{"pid": {sleeper.pid}, "host": "{run_folder.socket.gethostname()}"}}'
        )
        with pytest.raises(UserError, match=f"in use by process {sleeper.pid}"):
            run_folder.acquire(tmp_path)
    finally:
        sleeper.kill()
        sleeper.wait()
    run_folder.acquire(tmp_path)  # the holder is gone: taken over
    assert run_folder.read_lock(tmp_path)["pid"] == os.getpid()
    run_folder.release(tmp_path)
    assert not (tmp_path / run_folder.LOCK).exists()


def test_a_run_that_crashes_before_its_first_checkpoint_leaves_no_folder(tmp_path):
    """Any exception, not only bad input: an empty folder has nothing to resume from and would read as a run."""
    root = tmp_path / "runs"
    fresh = root / "group" / "vit" / "x-123456" / "seed0"
    with pytest.raises(RuntimeError, match="boom"), run_folder.claim(fresh, root):
        (fresh / "events.out.tfevents.1").write_text("")  # what a logger writes before the first epoch ends
        raise RuntimeError("boom")
    assert not root.exists(), "the crashed run's folder and its empty parents stay"

    kept = root / "group" / "vit" / "y-123456" / "seed0"
    with pytest.raises(RuntimeError), run_folder.claim(kept, root):
        (kept / "checkpoints").mkdir()
        (kept / "checkpoints" / "last.ckpt").write_bytes(b"0")
        raise RuntimeError("after a checkpoint")
    assert (kept / "checkpoints" / "last.ckpt").exists(), "a run with a checkpoint to resume from was removed"

    earlier = root / "group" / "vit" / "z-123456" / "seed0"
    earlier.mkdir(parents=True)
    with pytest.raises(KeyError), run_folder.claim(earlier, root):
        raise KeyError("a folder this command did not create")
    assert earlier.is_dir() and not (earlier / run_folder.LOCK).exists()


@pytest.mark.slow
def test_a_second_identical_command_is_refused_while_the_first_runs(tmp_path):
    """The lock through the command line: the same command, while a live process holds the folder."""
    from hydra import compose, initialize_config_dir

    from vitpos.run.identity import run_dir

    args = [*TINY, f"run.root={tmp_path / 'R'}"]
    with initialize_config_dir(str(ROOT / "configs"), version_base="1.3"):
        cfg = compose("train", overrides=[*args, "run.model=vit_micro"])
    folder = run_dir(cfg)
    folder.mkdir(parents=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        body = f'{{"pid": {sleeper.pid}, "host": "{run_folder.socket.gethostname()}", "command": "train.py"}}'
        (folder / run_folder.LOCK).write_text(body)
        assert_user_error(run_command("train.py", *args, cwd=tmp_path), f"is in use by process {sleeper.pid}")
        assert sorted(p.name for p in folder.iterdir()) == [run_folder.LOCK]  # nothing written beside it
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.slow
def test_a_sweep_goes_on_past_a_failed_job_and_exits_non_zero(tmp_path):
    from vitpos.compare import compare

    ran = run_command(
        "train.py", "-m", *TINY, "+trainer.limit_test_batches=1", "optim.lr=100,0.002", "run.root=R", cwd=tmp_path
    )
    out = ran.out + ran.err
    assert ran.code == 1, out
    assert "[job 0] end" in out and "training diverged" in out, out
    assert "[job 1] end" in out and "test/acc" in out, out  # the next job ran
    assert "2 jobs, 1 failed" in out, out
    (sweep,) = (tmp_path / "multirun").glob("*/*")
    assert "training diverged" in (sweep / "0" / "error.log").read_text()
    report = compare(tmp_path / "R", tmp_path / "report", [str(sweep)]).report
    assert "training diverged" in report and "optim.lr=100" in report, report


@pytest.mark.slow
def test_a_sweep_whose_jobs_all_fail_before_training(tmp_path):
    """No job leaves a run folder: every job's error is listed, and compare does not crash. (The jobs
    pass the sweep's config check; resume=true without a last.ckpt is refused as each job starts.)"""
    from vitpos.compare import compare

    args = ["data=shapes", "model=vit_micro", "seed=0,1", "resume=true", "run.root=R"]
    ran = run_command("train.py", "-m", *args, cwd=tmp_path)
    out = ran.out + ran.err
    assert ran.code == 1 and "2 jobs, 2 failed" in out and "Traceback" not in out, out
    (sweep,) = (tmp_path / "multirun").glob("*/*")
    report = compare(sweep, tmp_path / "report").report
    assert report.count("resume=true but ") >= 2, report
    assert not (tmp_path / "R").exists() or not any((tmp_path / "R").rglob("seed*")), "a job left a run folder"


@pytest.mark.slow
def test_the_same_command_on_other_data_trains_a_new_run(tmp_path):
    """Through the command line: trained on one ImageFolder copy, the same
    command on another copy (other files) trains again instead of printing the first copy's
    stored metrics; on the same data moved elsewhere it finds its finished run."""
    a = small_imagefolder(tmp_path / "a", per_class=4)
    other = tmp_path / "other"
    shutil.copytree(a, other)
    for png in sorted((other / "train" / "cat").glob("*.png"))[:2]:
        png.unlink()
    moved = tmp_path / "moved"
    shutil.copytree(a, moved)
    tiny = ["data.format=imagefolder", "model=vit_micro", "trainer.max_epochs=1", "data.val_size=10", "run.root=R",
            "eval.resolutions=[]", "task.pictures=false", "trainer.enable_progress_bar=false"]  # fmt: skip
    first = run_command("train.py", *tiny, f"data.root={a}", cwd=tmp_path)
    assert first.code == 0, first.out + first.err
    second = run_command("train.py", *tiny, f"data.root={other}", cwd=tmp_path)
    assert second.code == 0 and "finished earlier" not in second.out, second.out + second.err
    assert len(list((tmp_path / "R").rglob("metrics.json"))) == 2  # two runs, two folders
    again = run_command("train.py", *tiny, f"data.root={moved}", cwd=tmp_path)
    assert again.code == 0 and "finished earlier" in again.out, again.out + again.err
    assert len(list((tmp_path / "R").rglob("metrics.json"))) == 2
