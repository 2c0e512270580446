"""The divergence guard: the first non-finite loss stops the run with one line naming the
likely cause, a non-zero exit, no non-finite checkpoint, and the run marked diverged
(metrics.json and the TensorBoard scalar run/diverged). The commands run ``train.py``'s
``main(argv)`` in process."""

import json

import pytest
import torch
from conftest import run_command

from vitpos.callbacks import DivergenceGuard
from vitpos.errors import DivergenceError

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
    args = [*TINY, "optim.lr=100", f"run.root={tmp_path}"]
    ran = run_command("train.py", *args, cwd=tmp_path)
    output = ran.out + ran.err
    assert ran.code != 0, output
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

    rerun = run_command("train.py", *args, cwd=tmp_path)
    assert rerun.code != 0 and "diverged" in rerun.err  # refused, not trained again


def fake_trainer(epoch: int, metrics: dict):
    """The few Trainer attributes DivergenceGuard reads, with a one-process strategy."""

    class Strategy:
        @staticmethod
        def reduce_boolean_decision(flag, all=True):
            return flag

    class Trainer:
        current_epoch, global_step, num_training_batches, sanity_checking = epoch, 5, 10, False
        strategy = Strategy()
        callback_metrics = metrics

    return Trainer


def test_guard_stops_on_a_nan_loss_and_a_nan_val_loss():
    Trainer = fake_trainer(0, {"val/loss": torch.tensor(float("nan"))})

    guard = DivergenceGuard("optim.lr=1 too high")
    guard.on_train_batch_end(Trainer(), None, {"loss": torch.tensor(2.0)}, None, 0)  # finite: nothing
    with pytest.raises(DivergenceError, match=r"train/loss is not finite .*optim\.lr=1"):
        guard.on_train_batch_end(Trainer(), None, {"loss": torch.tensor(float("inf"))}, None, 1)
    with pytest.raises(DivergenceError, match="val/loss"):
        guard.on_validation_end(Trainer(), None)
    Trainer.sanity_checking = True  # the sanity check of an untrained model is not a divergence
    guard.on_validation_end(Trainer(), None)


def test_guard_stops_a_finite_runaway_loss_and_a_collapse_to_chance():
    """Divergence beyond NaN: a loss 10x a uniform guess's, or val/acc back at chance."""
    Trainer = fake_trainer(1, {"val/loss": torch.tensor(1.0), "val/acc": torch.tensor(0.9)})

    guard = DivergenceGuard("optim.lr=100 too high")
    guard.classes = 4  # bound: 10 x ln 4 = 13.9
    guard.on_train_batch_end(Trainer(), None, {"loss": torch.tensor(13.0)}, None, 0)  # high but below: nothing
    with pytest.raises(DivergenceError, match=r"above 13\.9 .*optim\.lr=100"):
        guard.on_train_batch_end(Trainer(), None, {"loss": torch.tensor(1.4e6)}, None, 1)
    guard.on_validation_end(Trainer(), None)  # 0.9: clearly above chance (0.25)
    Trainer.callback_metrics = {"val/loss": torch.tensor(1.4), "val/acc": torch.tensor(0.26)}
    with pytest.raises(DivergenceError, match=r"val/acc fell to chance \(0\.260, chance 0\.250\) from 0\.900"):
        guard.on_validation_end(Trainer(), None)
    fresh = DivergenceGuard("hint")  # never above chance: a slow start, not a collapse
    fresh.classes = 4
    fresh.on_validation_end(Trainer(), None)


def test_finite_divergence_through_the_command_line(tmp_path):
    """optim.lr=100 with 5 training batches reaches a finite loss of about 1e6 without a NaN: it
    stops, is marked diverged, and keeps no checkpoint from after the divergence."""
    args = [*TINY, "trainer.max_epochs=1", "+trainer.limit_train_batches=5", "optim.lr=100", f"run.root={tmp_path}"]
    ran = run_command("train.py", *args, cwd=tmp_path)
    output = ran.out + ran.err
    assert ran.code == 2 and "Traceback" not in output, output
    assert "training diverged: train/loss is not finite or above" in ran.err, output
    (status_file,) = tmp_path.rglob("metrics.json")
    assert json.loads(status_file.read_text())["status"] == "diverged"
    assert not list(tmp_path.rglob("*.ckpt"))  # it diverged in epoch 0: no best, no last
