"""AdamW with decoupled weight decay groups (split by timm), and linear warmup + cosine decay."""

from __future__ import annotations

import math

import torch
from timm.optim import param_groups_weight_decay
from torch import nn


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """``[decayed weights, everything else]``, split by timm's rule
    (``param_groups_weight_decay``): no decay for norms and biases (ndim <= 1)
    and for the names ``model.no_weight_decay()`` returns (position tables,
    RoPE frequencies, the class token).

    timm returns the no-decay group first, and a single group when
    ``weight_decay`` is 0. Here the two groups always come in this order, so the
    LR monitor's ``pg1``/``pg2`` and the optimizer state in a checkpoint keep
    their meaning for every ``optim.weight_decay`` (tests/test_optim.py)."""
    skip = model.no_weight_decay() if hasattr(model, "no_weight_decay") else ()
    # weight_decay=1.0 only makes timm split; the real values are set below
    split = param_groups_weight_decay(model, weight_decay=1.0, no_weight_decay_list=skip)
    params = {group["weight_decay"] > 0: group["params"] for group in split}
    return [
        {"params": params.get(True, []), "weight_decay": weight_decay},
        {"params": params.get(False, []), "weight_decay": 0.0},
    ]


def adamw_implementation(model: nn.Module, impl: str = "auto") -> dict:
    """AdamW's kernel choice: ``fused`` (one kernel over all parameters; CUDA,
    and CPU since torch 2.4: the fastest on CPU, docs/performance.md), ``foreach`` (multi-tensor),
    or ``forloop`` (per-parameter Python loop, the reference). ``auto``: fused
    where torch has a fused kernel for the parameters' device, else foreach.
    All three compute the same update (tests/test_fast_paths.py)."""
    if impl == "auto":
        try:
            from torch.optim.optimizer import _get_fused_kernels_supported_devices

            fused_devices = set(_get_fused_kernels_supported_devices())
        except ImportError:  # an older torch: CUDA only
            fused_devices = {"cuda"}
        devices = {p.device.type for p in model.parameters()}
        impl = "fused" if devices and devices <= fused_devices else "foreach"
    options = {"fused": {"fused": True}, "foreach": {"foreach": True}, "forloop": {"foreach": False}}
    if impl not in options:
        raise ValueError(f"optim.impl={impl!r}; valid: auto, fused, foreach, forloop")
    return options[impl]


def build_optimizer(
    model: nn.Module, lr: float, weight_decay: float, betas=(0.9, 0.999), impl: str = "auto"
) -> torch.optim.Optimizer:
    groups = parameter_groups(model, weight_decay)
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas), **adamw_implementation(model, impl))


def warmup_cosine(total_steps: int, warmup_steps: int, min_lr_ratio: float):
    """Multiplier of the base learning rate at each step: linear warmup
    ``(step + 1) / warmup_steps``, reaching 1 at step ``warmup_steps - 1``, then
    cosine decay from 1 to ``min_lr_ratio`` at ``total_steps`` (and after).

    Why not timm's ``CosineLRScheduler`` (``warmup_t``, ``warmup_lr_init``,
    ``lr_min``, ``t_in_epochs=False``): its cosine is this one (to rounding),
    but its warmup rises from ``warmup_lr_init`` at step 0 to the full rate at
    step ``warmup_t``, one step later than here, and no ``warmup_lr_init``
    gives this line; every run's numbers would change (tests/test_optim.py)."""
    total_steps = max(total_steps, 1)
    warmup_steps = min(warmup_steps, total_steps - 1) if total_steps > 1 else 0

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min((step - warmup_steps) / max(total_steps - warmup_steps, 1), 1.0)
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


def configure_optimizers(module, model: nn.Module, optim: dict) -> dict:
    """Lightning ``configure_optimizers`` body shared by the image and sequence tasks.

    ``optim``: every key of :class:`vitpos.config.optim.AdamW` (lr, weight_decay, betas, warmup_epochs, a
    fraction of an epoch allowed, min_lr_ratio, impl). Steps come from the trainer, so the schedule fits any budget.
    """
    opt = build_optimizer(model, optim["lr"], optim["weight_decay"], optim["betas"], optim["impl"])
    trainer = module.trainer
    if getattr(opt, "_step_supports_amp_scaling", False) and trainer.gradient_clip_val:
        # A fused AdamW advertises that it unscales fp16 gradients inside its step, so Lightning's
        # mixed-precision plugin refuses gradient clipping. Clearing the flag makes a GradScaler (16-mixed)
        # unscale before clipping, as for any optimizer; bf16-mixed has no scaler. The update is unchanged.
        opt._step_supports_amp_scaling = False
    total = int(trainer.estimated_stepping_batches)
    epochs = max(trainer.max_epochs or 1, 1)
    warmup = int(round(optim["warmup_epochs"] * total / epochs))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(total, warmup, optim["min_lr_ratio"]))
    # "name": the LR monitor's tag, train/lr/pg1 (decayed weights) and train/lr/pg2 (no decay), so
    # TensorBoard shows it in the train group, not as an lr-AdamW group ahead of train and val
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step", "name": "train/lr"}}
