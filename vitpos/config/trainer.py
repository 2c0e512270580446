"""The Lightning ``Trainer`` keys vitpos sets (``trainer=default``, ``gpu``, ``ddp``); any other is added with ``+``
(``+trainer.limit_train_batches=5``), and Lightning judges it."""

from __future__ import annotations

from functools import partial
from typing import Any

from vitpos.config.rules import Flag, Given, Int, Number, option, schema, variant

#: a key whose values Lightning's ``Trainer`` judges (the config check asks it): no part of the run's identity
lightning = partial(Given, "Lightning's Trainer takes", defines=False)
EPOCHS = Int(10, fix="an untrained model is not a run", unless="trainer.fast_dev_run")


@schema("trainer", "default")
class DefaultTrainer:
    """One process on whatever the machine has."""

    max_epochs: Any = option(30, "epochs to train", EPOCHS)
    accelerator: Any = option("auto", "cpu, gpu or auto", lightning())
    devices: Any = option("auto", "devices per node", lightning())
    precision: Any = "auto"  # bf16-mixed on a GPU or a CPU with native bf16 (AVX512-BF16/AMX), else 32-true
    gradient_clip_val: Any = option(1.0, "gradient norm clipping", Number(1.0))
    log_every_n_steps: Any = option(20, "training-loss logging interval", Int(20, defines=False))
    check_val_every_n_epoch: Any = option(1, "validate every n epochs", Int(1, null=True))
    deterministic: Any = False
    enable_progress_bar: Any = option(True, "Lightning's progress bar", Flag(defines=False))
    fast_dev_run: Any = option(False, "one batch of each loop, nothing saved", lightning())


#: one GPU, bf16 autocast
GpuTrainer = variant(DefaultTrainer, "trainer", "gpu", accelerator="gpu", devices=1, precision="bf16-mixed")


@schema("trainer", "ddp")
class DdpTrainer(DefaultTrainer):
    """Data-parallel training (configs/trainer/ddp.yaml says how to start it on one or several nodes)."""

    precision: Any = "bf16-mixed"
    num_nodes: Any = option(1, "nodes (trainer=ddp)", lightning())
    strategy: Any = option("ddp", "ddp and the like (trainer=ddp)", lightning())


@schema
class LightningKeys:
    """``Trainer`` keys no trainer config sets (added with ``+``), declared for their help and run identity."""

    enable_model_summary: Any = option(True, "print the model's layers", lightning())
    default_root_dir: Any = option(None, "Lightning's own folder (runs go under run.root)", lightning())
