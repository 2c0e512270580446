"""``model=timm``: ``model.name``, ``model.kwargs`` and ``model.checkpoint``, checked before anything is
written, and the timm model's geometry for the other checks.

A timm model's patch size, width, heads and depth come from the model itself, not from the config:
:func:`with_timm_geometry` reads them (:func:`vitpos.integrations.timm_weights.geometry`) from the
model built on the ``meta`` device (shapes, no memory) and fills them into the config's ``model``
section that the size, memory and encoding checks read. :func:`check_timm_checkpoint` reads the
file and refuses a key whose shape does not fit, by the same rule the task loads it with
(:func:`vitpos.integrations.timm_weights.plan_checkpoint`). Other models pass untouched, and torch
is imported only for a timm model.
"""

from __future__ import annotations

from vitpos.errors import UserError
from vitpos.integrations import is_timm


def with_timm_geometry(c: dict, image: bool) -> dict:
    """``c["model"]``, with a timm model's ``patch_size``, ``dim``, ``num_heads``, ``depth`` and
    ``num_prefix_tokens`` filled in; a :class:`UserError` naming ``model.name`` (or
    ``model.kwargs``) for a model that is not a timm ViT vitpos can convert."""
    m = c["model"]
    if not is_timm(m):
        return m
    if not image:
        raise UserError("model", "model=timm is an image model", "task=classification, or model=seq_small")
    if not isinstance(m.get("name"), str) or not m["name"]:
        raise UserError(
            "model.name", f"must name a timm model, got {m.get('name')!r}", "model.name=vit_tiny_patch16_224"
        )
    if not isinstance(m.get("kwargs") or {}, dict):
        raise UserError("model.kwargs", f"must be a mapping, got {m.get('kwargs')!r}", "model.kwargs={depth:6}")
    from vitpos.integrations.timm_weights import create_vit, geometry

    model = create_vit(m, int(c["data"].get("num_classes") or 1), None, device="meta")
    return {**m, **geometry(model)}


def check_timm_checkpoint(c: dict) -> None:
    """``model.checkpoint`` (null: timm's initialisation): a readable state dict whose keys fit
    the model ``model.name`` makes for this data (after :func:`with_timm_geometry`)."""
    m = c["model"]
    if not is_timm(m) or m.get("checkpoint") is None:
        return
    from vitpos.integrations.timm_weights import create_vit, plan_checkpoint, read_checkpoint

    state = read_checkpoint(m["checkpoint"])
    model = create_vit(m, int(c["data"].get("num_classes") or 1), c["data"]["img_size"], device="meta")
    plan_checkpoint(model, state, str((c.get("encoding") or {}).get("name")), m["checkpoint"])
