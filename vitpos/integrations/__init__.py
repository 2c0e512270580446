"""Other model libraries with vitpos encodings in them: timm's Vision Transformers.

``vitpos.integrations.timm.apply_encoding(model, "rope_2d_mixed")`` puts any image encoding
into a built ``timm`` ViT, keeping its weights; ``vitpos.integrations.timm_weights`` builds the
timm model of ``python train.py model=timm`` and loads a timm checkpoint file into it.

This file imports nothing heavy: the config check asks :func:`is_timm` before torch loads.
"""

from __future__ import annotations

from collections.abc import Mapping


def is_timm(model: Mapping) -> bool:
    """Whether a ``model`` config section describes a timm model (``configs/model/timm.yaml``:
    ``model.name`` names it); vitpos's own ViT and sequence configs have no ``name``."""
    return "name" in model
