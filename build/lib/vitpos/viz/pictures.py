"""Every picture that applies to a model's encoding, for logging during training."""

from __future__ import annotations

import numpy as np
import torch

from vitpos.encodings import Grid
from vitpos.encodings.rope import RoPE2DMixed

from .attention import attention_maps, mean_attention_distance
from .encoding import bias_vs_offset, position_similarity, rope_logit_vs_offset, rope_mixed_directions, table_heatmap
from .render import encoding_of, evaluating, hooks_of, parts_of


def pictures_for(
    model, images: torch.Tensor | None = None, grid: Grid | None = None, blocks=(0,), n_images: int = 4
) -> dict[str, np.ndarray]:
    """All pictures that apply to ``model``'s encoding, as ``{tag: (H, W, 3) uint8}``.

    What applies is read from the hooks the encoding (or each part of a
    ``combo``) overrides, so a new encoding gets its pictures without a change
    here:

    - ``add_to_tokens`` (absolute tables): ``pos/similarity``, ``pos/table``;
    - ``rotate_qk`` (RoPE): ``pos/rope_logit``, and ``pos/rope_mixed_freqs`` for RoPE-Mixed;
    - ``attention_bias`` (relative bias, ALiBi): ``pos/bias``;
    - with ``images`` (B, C, H, W) and a ViT (a model with ``attention_maps``
      and ``grid_for``): ``attn/maps`` and ``attn/distance``, for every
      encoding (``none`` and ``cpe`` included). Sequence models get the
      encoding pictures on their 1D grid only; their inputs are ignored.

    ``model`` may be a ``VisionTransformer``, a LightningModule holding one at
    ``.model``, or a bare encoding (then no attention pictures). ``blocks``:
    which blocks the RoPE and bias pictures show. The model's train/eval mode
    is restored afterwards. Log with
    ``logger.experiment.add_image(tag, img, step, dataformats="HWC")``.
    """
    pe = encoding_of(model)
    grid = tuple(grid or pe.train_grid)
    vit = getattr(model, "model", model)  # a LightningModule holding the ViT, or the ViT
    hooks = hooks_of(pe)
    out: dict[str, np.ndarray] = {}
    with evaluating(pe):
        if "add_to_tokens" in hooks:
            out["pos/similarity"] = position_similarity(pe, grid)
            out["pos/table"] = table_heatmap(pe, grid)
        if "rotate_qk" in hooks:
            out["pos/rope_logit"] = rope_logit_vs_offset(pe, grid, blocks)
            if any(isinstance(p, RoPE2DMixed) for p in parts_of(pe)):
                out["pos/rope_mixed_freqs"] = rope_mixed_directions(pe)
        if "attention_bias" in hooks:
            out["pos/bias"] = bias_vs_offset(pe, grid, blocks)
    if images is not None and images.dim() == 4 and hasattr(vit, "attention_maps") and hasattr(vit, "grid_for"):
        out["attn/maps"] = attention_maps(vit, images, n_images)
        out["attn/distance"] = mean_attention_distance(vit, images)[1]
    return out
