"""Exact resume and finished-run recognition through the real command line (real processes: a
signal ends them).

A run killed with SIGKILL in the middle of epoch 2 and rerun ends with weights
bitwise identical to a run that never stopped: last.ckpt is written at every
epoch end, and batch order, augmentation and dropout of epoch e come from
(seed, e) alone (vitpos.callbacks.EpochSeed, vitpos.data.memory.EpochSampler).
Rerunning a finished command prints its stored metrics and trains nothing.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from conftest import ROOT, run_command

TINY = [
    "data=shapes",
    "model=vit_micro",
    "model.drop_path=0.1",  # the global RNG matters too: drop-path must replay identically
    "data.num_train=1280",
    "data.num_test=128",
    "data.val_size=128",
    "data.batch_size=32",  # 36 steps per epoch: room to land a kill inside one
    "data.crop_padding=2",
    "trainer.max_epochs=3",
    "trainer.enable_progress_bar=false",
    "task.pictures=false",
    "eval.resolutions=[]",
]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def command(root):
    return [sys.executable, "train.py", *TINY, f"run.root={root}"]


def last_ckpt(root):
    found = list(root.rglob("checkpoints/last.ckpt"))
    return found[0] if found else None


def wait_for_writes(proc, root, count: int, timeout: float = 600) -> list[float]:
    """Times at which last.ckpt was (re)written, until ``count`` writes or exit."""
    seen, times, start = None, [], time.monotonic()
    while len(times) < count and proc.poll() is None and time.monotonic() - start < timeout:
        path = last_ckpt(root)
        stamp = path.stat().st_mtime_ns if path is not None and path.exists() else None
        if stamp is not None and stamp != seen:
            seen = stamp
            times.append(time.monotonic())
        time.sleep(0.02)
    return times


@pytest.mark.slow
def test_sigkill_mid_epoch_then_rerun_is_bitwise_identical_and_a_finished_run_is_not_retrained(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    # the uninterrupted run, timing its epochs from the last.ckpt writes
    proc = subprocess.Popen(command(a), cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    writes = wait_for_writes(proc, a, 2)
    out_a = proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, out_a
    epoch_time = writes[1] - writes[0]

    # the same command, killed 40% into epoch 2 (after epoch 1's checkpoint), then rerun
    proc = subprocess.Popen(command(b), cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert len(wait_for_writes(proc, b, 1)) == 1
    time.sleep(0.4 * epoch_time)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = torch.load(last_ckpt(b), map_location="cpu", weights_only=True)
    assert killed_at["epoch"] == 0, "the kill came after epoch 2 ended; the machine is unusually uneven"
    assert not (last_ckpt(b).parent.parent / "metrics.json").exists()
    rerun = subprocess.run(command(b), cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr

    state_a = torch.load(last_ckpt(a), map_location="cpu", weights_only=True)
    state_b = torch.load(last_ckpt(b), map_location="cpu", weights_only=True)
    assert state_a["global_step"] == state_b["global_step"] == 3 * 36
    for name, value in state_a["state_dict"].items():
        assert torch.equal(value, state_b["state_dict"][name]), name
    metrics = [json.loads((last_ckpt(r).parent.parent / "metrics.json").read_text()) for r in (a, b)]
    assert metrics[0]["status"] == metrics[1]["status"] == "complete"

    def scores(m: dict) -> dict:  # what was learned; time/* (minutes of fitting, evaluating) differs by nature
        return {k: v for k, v in m["metrics"].items() if not k.startswith("time/")}

    assert scores(metrics[0]) == scores(metrics[1]) and len(scores(metrics[0])) >= 5
    assert 0 < metrics[1]["metrics"]["time/fit_min"] < 30  # fit minutes, summed over the interrupted run's parts

    # rerunning the finished command (train.py's main, in process): the same metrics, nothing trained or written
    run = last_ckpt(a).parent.parent
    files = {p: p.stat().st_mtime_ns for p in run.rglob("*")}
    again = run_command("train.py", *TINY, f"run.root={a}", cwd=ROOT)
    assert again.code == 0, again.out + again.err
    assert "nothing trained" in again.out
    lines = [line for line in out_a.splitlines() if line.strip().startswith("test/")]
    assert lines and all(line in again.out for line in lines), (lines, again.out)
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*")} == files  # no new event file, checkpoint untouched


def test_epoch_sampler_depends_only_on_seed_and_epoch_and_shards_without_repeats():
    from vitpos.data.memory import EpochSampler, ShardSampler

    first = EpochSampler(10, seed=3)
    first.set_epoch(2)
    again = EpochSampler(10, seed=3)  # a resumed run: a fresh sampler told the epoch
    again.set_epoch(2)
    assert list(first) == list(again) and sorted(first) == list(range(10))
    first.set_epoch(3)
    assert list(first) != list(again)
    ranks = [EpochSampler(10, seed=3, rank=r, world=3) for r in range(3)]
    shards = [list(s) for s in ranks]
    assert all(len(s) == 3 for s in shards) and len(set(sum(shards, []))) == 9  # equal lengths, disjoint
    evals = [list(ShardSampler(10, r, 3)) for r in range(3)]
    assert sum(evals, []) == list(range(10))  # every sample exactly once, no padding


@pytest.mark.slow
def test_sigterm_stops_with_exit_143_and_leaves_the_last_finished_epoch(tmp_path):
    proc = subprocess.Popen(
        command(tmp_path), cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert len(wait_for_writes(proc, tmp_path, 1)) == 1
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=600)[0]
    assert proc.returncode == 143, output
    assert "Rerun the same command to continue exactly" in output and "Traceback" not in output, output
    assert torch.load(last_ckpt(tmp_path), map_location="cpu", weights_only=True)["epoch"] == 0
    assert not list(tmp_path.rglob("last.ckpt.tmp"))


class _RunsCode:
    def __reduce__(self):
        return (print, ("this ran",))


def test_a_crafted_checkpoint_is_refused_by_the_loaders_of_the_training_path(tmp_path):
    import pickle

    from vitpos.run.checkpoint import CheckpointError
    from vitpos.run.plan import OWN_FIX, read_resumable
    from vitpos.tasks.classification import ImageClassifier

    evil = tmp_path / "last.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"cfg": {}}, "payload": _RunsCode()}, evil)
    with pytest.raises(CheckpointError, match="refused"):  # resume=auto's config check
        read_resumable(evil, OWN_FIX)
    with pytest.raises(pickle.UnpicklingError):  # load_from_checkpoint defaults to weights_only=True
        ImageClassifier.load_from_checkpoint(evil, map_location="cpu")


def test_resume_auto_compares_only_what_defines_the_run(tmp_path):
    """A harmless change (eval batch size, pictures) continues the checkpoint;
    a run-defining one (the encoding's base) is refused with the differing key."""
    from omegaconf import OmegaConf

    from vitpos.run.identity import identity
    from vitpos.run.plan import OWN_FIX, check_same_run, read_resumable

    base = {
        "model": {"dim": 64},
        "encoding": {"name": "rope_2d", "base": 100.0},
        "data": {"name": "shapes", "eval_batch_size": 512},
        "optim": {"lr": 1e-3},
        "task": {"name": "classification", "pictures": True},
        "trainer": {"max_epochs": 3},
    }
    last = tmp_path / "last.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"cfg": base}}, last)
    harmless = OmegaConf.create(base)
    harmless.data.eval_batch_size, harmless.task.pictures = 64, False
    _, theirs = read_resumable(last, OWN_FIX)
    check_same_run(theirs, identity(harmless), last)  # no error
    changed = OmegaConf.create(base)
    changed.encoding.base = 10.0
    with pytest.raises(ValueError, match="encoding.base"):
        check_same_run(theirs, identity(changed), last)


def test_the_interrupt_line_counts_epochs_as_the_console_does(tmp_path):
    """The per-epoch console line says ``epoch 3/6`` for Lightning's ``current_epoch`` 2; a run
    stopped in that epoch names the same number, and ``last.ckpt`` then holds the epoch before."""
    from vitpos.callbacks import LastCheckpoint

    last = LastCheckpoint(tmp_path / "last.ckpt")
    assert last.interrupted_message(0).startswith("interrupted during epoch 1; no epoch finished.")
    (tmp_path / "last.ckpt").write_bytes(b"")
    assert last.interrupted_message(2).startswith(
        f"interrupted during epoch 3; {tmp_path / 'last.ckpt'} holds the end of epoch 2."
    )
