"""The divergence guard (issue 10): the first non-finite loss stops the run with
one line naming the likely cause, a non-zero exit, no non-finite checkpoint, and
the run marked diverged (metrics.json and the TensorBoard scalar run/diverged)."""

import json
import os
import subprocess
import sys

import torch
from conftest import ROOT

TINY = [
    "data=shapes",
    "model=vit_micro",
    "data.num_train=640",
    "data.num_test=64",
    "data.val_size=128",
    "data.batch_size=32",  # 16 steps per epoch: enough for lr=100 to blow up inside epoch 0
    "trainer.max_epochs=2",
    "trainer.enable_progress_bar=false",
    "task.pictures=false",
    "eval.resolutions=[]",
]


def test_lr_100_stops_in_the_first_epoch_and_is_marked_diverged(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "train.py", *TINY, "optim.lr=100", f"run.root={tmp_path}"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "training diverged" in errors[0] and "optim.lr=100" in errors[0], output

    (status_file,) = tmp_path.rglob("metrics.json")
    status = json.loads(status_file.read_text())
    assert status["status"] == "diverged" and status["epoch"] == 0, status  # within the first epoch
    for ckpt in status_file.parent.rglob("*.ckpt"):  # no checkpoint with non-finite weights, best or last
        weights = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
        assert all(torch.isfinite(v).all() for v in weights.values() if v.is_floating_point()), ckpt

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(status_file.parent)).Reload()
    assert [e.value for e in events.Scalars("run/diverged")] == [1.0]

    rerun = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode != 0 and "diverged" in rerun.stderr  # refused, not trained again


def test_guard_stops_on_a_nan_loss_and_a_nan_val_loss():
    import pytest

    from vitpos.callbacks import DivergenceError, DivergenceGuard

    class Strategy:
        @staticmethod
        def reduce_boolean_decision(flag, all=True):
            return flag

    class Trainer:
        current_epoch, global_step, num_training_batches, sanity_checking = 0, 5, 10, False
        strategy = Strategy()
        callback_metrics = {"val/loss": torch.tensor(float("nan"))}

    guard = DivergenceGuard("optim.lr=1 too high")
    guard.on_train_batch_end(Trainer(), None, {"loss": torch.tensor(2.0)}, None, 0)  # finite: nothing
    with pytest.raises(DivergenceError, match=r"train/loss is not finite .*optim\.lr=1"):
        guard.on_train_batch_end(Trainer(), None, {"loss": torch.tensor(float("inf"))}, None, 1)
    with pytest.raises(DivergenceError, match="val/loss"):
        guard.on_validation_end(Trainer(), None)
    Trainer.sanity_checking = True  # the sanity check of an untrained model is not a divergence
    guard.on_validation_end(Trainer(), None)
