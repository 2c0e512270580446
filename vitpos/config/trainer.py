"""The Lightning ``Trainer`` keys vitpos sets (``trainer=default``, ``gpu``, ``ddp``): one dataclass per option. Any
other ``Trainer`` argument is added with ``+`` (``+trainer.limit_train_batches=5``), and Lightning judges it.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from vitpos.config.rules import Flag, Given, Int, Number, option, schema

#: a key whose values Lightning's ``Trainer`` judges (the config check asks it): no part of the run's identity
lightning = partial(Given, "Lightning's Trainer takes", defines=False)


@schema
class DefaultTrainer:
    """One process on whatever the machine has."""

    max_epochs: Any = option(30, rule=Int(10, fix="an untrained model is not a run", unless="trainer.fast_dev_run",
                                         help="epochs to train"))  # fmt: skip
    accelerator: Any = option("auto", rule=lightning(help="cpu, gpu or auto"))
    devices: Any = option("auto", rule=lightning(help="devices per node"))
    precision: Any = "auto"  # bf16-mixed on a GPU or a CPU with native bf16 (AVX512-BF16/AMX), else 32-true
    #   (vitpos/runtime.py)
    gradient_clip_val: Any = option(1.0, rule=Number(1.0, help="gradient norm clipping"))
    log_every_n_steps: Any = option(20, rule=Int(20, defines=False, help="training-loss logging interval"))
    check_val_every_n_epoch: Any = option(1, rule=Int(1, null=True, help="validate every n epochs"))
    deterministic: Any = False
    enable_progress_bar: Any = option(True, rule=Flag(defines=False, help="Lightning's progress bar"))
    fast_dev_run: Any = option(False, rule=lightning(help="one batch of each loop, nothing saved"))  # debug=fast


@schema
class GpuTrainer(DefaultTrainer):
    """One GPU, bf16 autocast."""

    accelerator: Any = "gpu"
    devices: Any = 1
    precision: Any = "bf16-mixed"


@schema
class DdpTrainer(DefaultTrainer):
    """Data-parallel training (configs/trainer/ddp.yaml says how to start it on one or several nodes)."""

    precision: Any = "bf16-mixed"
    num_nodes: Any = option(1, rule=lightning(help="nodes (trainer=ddp)"))
    strategy: Any = option("ddp", rule=lightning(help="ddp and the like (trainer=ddp)"))


@schema
class LightningKeys:
    """``Trainer`` keys no trainer config sets, added with ``+``: not registered (a config gains them only when
    a command adds them), declared for their help and their part in the run's identity."""

    enable_model_summary: Any = option(True, rule=lightning(help="print the model's layers"))
    default_root_dir: Any = option(None, rule=lightning(help="Lightning's own folder (runs go under run.root)"))
