"""The optimiser's options and defaults (``optim=adamw``): AdamW with a linear warmup, then a cosine decay."""

from __future__ import annotations

from typing import Any

from vitpos.config.rules import Given, Number, option, schema

BETAS = Number("[0.9,0.999]", below=1, null=False, items=True, length=2, help="AdamW's (beta1, beta2)")
IMPL = Given(
    "auto, fused, foreach or forloop", as_before=("auto",), help="torch's AdamW kernel (auto: fused where it can)"
)


@schema("optim", "adamw")
class AdamW:
    """AdamW (decoupled weight decay; none on biases, norms and position tables: :mod:`vitpos.tasks.optim`)."""

    lr: Any = option(1.0e-3, "peak learning rate of AdamW", Number("1e-3", above=True, null=False))
    weight_decay: Any = option(0.05, "AdamW's decoupled weight decay", Number(0))
    betas: Any = option([0.9, 0.999], rule=BETAS)
    warmup_epochs: Any = option(1, "linear warmup epochs, then cosine decay", Number(0))
    min_lr_ratio: Any = option(0.01, "the cosine decay ends at this fraction of optim.lr", Number(0.01, null=False))
    impl: Any = option("auto", rule=IMPL)  # speed, not what is learned (not in the run's identity at auto)
