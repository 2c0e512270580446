"""The optimiser's options and defaults (``optim=adamw``): AdamW with a linear warmup, then a cosine decay.

:func:`vitpos.tasks.optim.configure_optimizers` reads every key as it stands: the defaults are here, once.
A task's recipe may set other values (``configs/task/classification.yaml`` sets ``optim.lr``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class AdamW:
    """AdamW (decoupled weight decay; none on biases, norms and position tables: :mod:`vitpos.tasks.optim`)."""

    lr: Any = 1.0e-3  # the peak learning rate, reached at the end of the warmup
    weight_decay: Any = 0.05
    betas: Any = field(default_factory=lambda: [0.9, 0.999])
    warmup_epochs: Any = 1  # linear warmup (a fraction of an epoch allowed), then cosine decay to min_lr_ratio * lr
    min_lr_ratio: Any = 0.01  # every committed run ended its cosine decay at 1% of optim.lr
    impl: Any = "auto"  # torch's AdamW kernel: auto (fused where the device has it, else foreach) | fused | foreach
    #   | forloop; speed, not what is learned (not in the run's identity at auto)
