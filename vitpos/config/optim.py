"""The optimiser's options and defaults (``optim=adamw``): AdamW with a linear warmup, then a cosine decay; the
defaults are here, once (a task's recipe may set others).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vitpos.config.rules import Given, Number, option

BETAS = Number("[0.9,0.999]", below=1, null=False, items=True, length=2, help="AdamW's (beta1, beta2)")
MIN_LR = Number(0.01, null=False, help="the cosine decay ends at this fraction of optim.lr")
IMPL = Given(
    "auto, fused, foreach or forloop", as_before=("auto",), help="torch's AdamW kernel (auto: fused where it can)"
)


@dataclass
class AdamW:
    """AdamW (decoupled weight decay; none on biases, norms and position tables: :mod:`vitpos.tasks.optim`)."""

    lr: Any = option(1.0e-3, rule=Number("1e-3", above=True, null=False, help="peak learning rate of AdamW"))
    weight_decay: Any = option(0.05, rule=Number(0, help="AdamW's decoupled weight decay"))
    betas: Any = option([0.9, 0.999], rule=BETAS)
    warmup_epochs: Any = option(1, rule=Number(0, help="linear warmup epochs, then cosine decay"))  # a fraction of
    #   an epoch allowed; the cosine decays to min_lr_ratio * lr
    min_lr_ratio: Any = option(0.01, rule=MIN_LR)  # every committed run ended its cosine decay at 1% of optim.lr
    impl: Any = option("auto", rule=IMPL)  # fused where the device has it, else foreach; speed, not what is
    #   learned (not in the run's identity at auto)
