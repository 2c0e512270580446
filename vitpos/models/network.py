"""The network of a run from its plain config: one builder for training and for the config check.

The tasks (:mod:`vitpos.tasks`) train what :func:`network` builds, and the config check
(:mod:`vitpos.checks.model`) builds the same network before anything is written, so the
model's and the encoding's constructors are the one place their rules are written.
"""

from __future__ import annotations

from torch import nn

from .seq_transformer import SequenceTransformer
from .vit import VisionTransformer


def network(cfg: dict, num_classes: int, vocab_size: int | None = None) -> nn.Module:
    """vitpos's ViT for an image run (``vocab_size`` None), else the sequence Transformer over
    ``vocab_size`` tokens; ``model.compile`` chooses how training runs the model, not what it is."""
    options = {k: v for k, v in cfg["model"].items() if k != "compile"}
    data = cfg["data"]
    if vocab_size is None:
        return VisionTransformer(cfg["encoding"], data["img_size"], num_classes=num_classes, **options)
    return SequenceTransformer(cfg["encoding"], vocab_size, num_classes, max_len=data["train_len"], **options)
