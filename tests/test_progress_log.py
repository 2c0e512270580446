"""What a run shows while it trains: a progress bar on a terminal only; with standard output
redirected (a log file, a pipe) one line per epoch with the epoch, the step rate and the metrics;
epochs counted from 1 in those lines and in the best checkpoint's name."""

from __future__ import annotations

import io
import re
import sys

import torch
from conftest import CONFIGS
from hydra import compose, initialize_config_dir

from vitpos.callbacks import BestCheckpoint
from vitpos.cli.console import shows_bar
from vitpos.train import train

EPOCH_LINE = re.compile(
    r"^rope_2d/seed0: epoch (\d+)/2  \d+\.\d steps/s  train/loss \d\.\d{4}  val/loss \d\.\d{4}  val/acc \d\.\d{4}"
    r"  \(\d+\.\d min\)$"
)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_is_drawn_only_on_a_terminal_that_asked_for_one(monkeypatch):
    monkeypatch.setattr(sys, "stdout", Terminal())
    assert shows_bar(True) and not shows_bar(False)
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # a file or a pipe
    assert not shows_bar(True)


def test_the_best_checkpoint_is_named_by_its_one_based_epoch(tmp_path):
    best = BestCheckpoint(dirpath=str(tmp_path), filename="best-epoch{epoch:03d}", auto_insert_metric_name=False)
    assert best.format_checkpoint_name({"epoch": torch.tensor(0)}) == str(tmp_path / "best-epoch001.ckpt")
    assert best.format_checkpoint_name({"epoch": torch.tensor(11)}, ver=1) == str(tmp_path / "best-epoch012-v1.ckpt")


def redirected_run(tmp_path, capsys, *extra: str) -> str:
    """What a 2-epoch shapes run prints with its bar asked for (the default) and standard output
    captured, as in a log."""
    overrides = ["data=shapes", "data.num_train=128", "data.num_test=32", "data.val_size=32", "model=vit_micro",
                 "encoding=rope_2d", "eval.resolutions=[]", "trainer.max_epochs=2", "task.pictures=false",
                 "trainer.enable_progress_bar=true", f"run.root={tmp_path / 'runs'}", *extra]  # fmt: skip
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        train(compose("train", overrides=overrides))
    return capsys.readouterr().out


def test_a_redirected_run_prints_a_line_per_epoch(tmp_path, capsys):
    """A line for each epoch, counted from 1, and a best checkpoint named within 1..2."""
    out = redirected_run(tmp_path, capsys)
    epochs = [int(m.group(1)) for line in out.splitlines() if (m := EPOCH_LINE.match(line))]
    assert epochs == [1, 2], out
    (best,) = (tmp_path / "runs").rglob("best-epoch*.ckpt")
    assert best.name in ("best-epoch001.ckpt", "best-epoch002.ckpt")


def test_an_epoch_without_validation_gets_its_line_too(tmp_path, capsys):
    out = redirected_run(tmp_path, capsys, "trainer.check_val_every_n_epoch=2")
    lines = [line for line in out.splitlines() if line.startswith("rope_2d/seed0: epoch ")]
    assert [line.split()[2] for line in lines] == ["1/2", "2/2"], out
    assert "steps/s" in lines[0] and "val/acc" not in lines[0] and EPOCH_LINE.match(lines[1]), lines
