"""AdamW with decoupled weight decay groups, and linear warmup + cosine decay."""

from __future__ import annotations

import math

import torch
from torch import nn


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two groups: decayed weights, and everything that should not decay:
    norms and biases (ndim <= 1) and whatever ``model.no_weight_decay()`` names
    (position tables, RoPE frequencies, the class token), as in timm."""
    skip = model.no_weight_decay() if hasattr(model, "no_weight_decay") else set()
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim <= 1 or name in skip else decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def build_optimizer(model: nn.Module, lr: float, weight_decay: float, betas=(0.9, 0.999)) -> torch.optim.Optimizer:
    return torch.optim.AdamW(parameter_groups(model, weight_decay), lr=lr, betas=tuple(betas))


def warmup_cosine(total_steps: int, warmup_steps: int, min_lr_ratio: float = 0.0):
    """Multiplier of the base learning rate at each step: linear warmup from
    ~0 to 1 over ``warmup_steps``, then cosine decay to ``min_lr_ratio``."""
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

    ``optim``: lr, weight_decay, warmup_epochs (fraction of an epoch allowed),
    min_lr_ratio. Steps come from the trainer, so the schedule fits any budget.
    """
    opt = build_optimizer(model, optim["lr"], optim["weight_decay"], optim.get("betas", (0.9, 0.999)))
    trainer = module.trainer
    total = int(trainer.estimated_stepping_batches)
    epochs = max(trainer.max_epochs or 1, 1)
    warmup = int(round(optim.get("warmup_epochs", 1) * total / epochs))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(total, warmup, optim.get("min_lr_ratio", 0.0)))
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
