"""The Lightning ``Trainer`` keys vitpos sets (``trainer=default``, ``gpu``, ``ddp``): one dataclass per option.

Every other ``Trainer`` argument is Lightning's to define, added with ``+`` (``+trainer.limit_train_batches=5``);
the config check asks Lightning whether it takes it (:mod:`vitpos.checks.options`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class DefaultTrainer:
    """One process on whatever the machine has."""

    max_epochs: Any = 30
    accelerator: Any = "auto"
    devices: Any = "auto"
    precision: Any = "auto"  # bf16-mixed on a GPU or a CPU with native bf16 (AVX512-BF16/AMX), else 32-true
    #   (vitpos/runtime.py)
    gradient_clip_val: Any = 1.0
    log_every_n_steps: Any = 20
    check_val_every_n_epoch: Any = 1
    deterministic: Any = False
    enable_progress_bar: Any = True
    fast_dev_run: Any = False  # true: one batch of each loop, nothing saved (debug=fast)


@dataclass
class GpuTrainer(DefaultTrainer):
    """One GPU, bf16 autocast."""

    accelerator: Any = "gpu"
    devices: Any = 1
    precision: Any = "bf16-mixed"


@dataclass
class DdpTrainer(DefaultTrainer):
    """Data-parallel training (configs/trainer/ddp.yaml says how to start it on one or several nodes)."""

    precision: Any = "bf16-mixed"
    num_nodes: Any = 1
    strategy: Any = "ddp"
