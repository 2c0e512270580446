"""Checkpoints for the tool tests without training: a vitpos config, an
initialized model, saved as a training run saves them; and a crafted one."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from conftest import compose_train
from omegaconf import OmegaConf

IMAGE = ["data=shapes", "data.num_train=64", "data.num_test=32", "data.val_size=32", "data.eval_batch_size=16",
         "model=vit_micro"]  # fmt: skip
SEQUENCE = ["task=sequence", "data.num_train=32", "data.num_val=16", "data.num_test=16", "data.num_length_test=8",
            "model.dim=32", "model.depth=1", "model.num_heads=2"]  # fmt: skip


def make_checkpoint(path: Path, *overrides: str) -> Path:
    """``path/checkpoints/last.ckpt`` of an untrained model of the composed config."""
    from vitpos.tasks import build

    cfg = compose_train(*overrides)
    torch.manual_seed(0)
    module, _ = build(cfg)
    ckpt = path / "checkpoints" / "last.ckpt"
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": module.state_dict(), "epoch": 0,
                "hyper_parameters": {"cfg": OmegaConf.to_container(cfg, resolve=True)}}, ckpt)  # fmt: skip
    return ckpt


class RunsCode:
    """Unpickling this runs ``touch <marker>``: what a crafted checkpoint can do under weights_only=False."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def make_evil_checkpoint(path: Path, marker: Path) -> Path:
    """A ``last.ckpt`` shaped like a vitpos checkpoint that runs a command when unpickled."""
    ckpt = path / "checkpoints" / "last.ckpt"
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": {}, "hyper_parameters": {"cfg": {"payload": RunsCode(marker)}}}, ckpt)
    return ckpt
