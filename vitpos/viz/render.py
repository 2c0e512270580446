"""Shared plumbing of the pictures: figures rendered to RGB arrays, finding which
hooks an encoding acts through, and the depth and patch of the model drawn (a
vitpos ViT, or a timm ViT converted by ``vitpos.integrations.timm.apply_encoding``).

Every picture in :mod:`vitpos.viz` is a Matplotlib ``Figure`` rendered off
screen (the Agg canvas, no pyplot state) to an ``np.ndarray`` of shape
``(height, width, 3)`` and dtype ``uint8``: ready for
``SummaryWriter.add_image(tag, img, dataformats="HWC")`` or a PNG file.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from torch import nn

from vitpos.encodings import Grid, PositionalEncoding

DPI = 100  # pixels per inch of every picture: an image is figsize * DPI pixels
PANEL = 2.0  # inches per small panel (one head, one block)
HOOKS = ("add_to_tokens", "after_block", "rotate_qk", "attention_bias")


def new_figure(rows: int, cols: int, title: str, panel: float = PANEL, extra_width: float = 0.8):
    """A constrained-layout figure with a ``rows x cols`` array of axes (always 2D)."""
    fig = Figure(figsize=(cols * panel + extra_width, rows * panel + 0.5), dpi=DPI, layout="constrained")
    fig.suptitle(title, fontsize="medium")
    return fig, fig.subplots(rows, cols, squeeze=False)


def colour_scale(values: np.ndarray) -> tuple[float, float, str, str]:
    """(vmin, vmax, colormap, range text) fitted to the finite ``values`` shown.

    A fixed scale hides structure: sincos similarities lie in about 0.6..1, which
    a -1..1 scale paints almost uniformly. Data that straddle 0 get a diverging
    map centred on 0 (so the sign stays readable); one-signed data a sequential
    map from their min to their max. The text states the data's own range.
    """
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    text = f"range {lo:.3g} to {hi:.3g}"
    if lo < 0 < hi:
        v = max(-lo, hi)
        return -v, v, "RdBu_r", text + ", centred on 0"
    if hi - lo < 1e-12:  # constant: widen so the colour map has a span
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi, "viridis", text


def to_image(fig: Figure) -> np.ndarray:
    """Render ``fig`` to an RGB ``uint8`` array (H, W, 3)."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def encoding_of(model_or_pe) -> PositionalEncoding:
    """The encoding of a ``VisionTransformer`` (``.pos``), of a LightningModule
    holding one (``.model.pos``), or the encoding itself."""
    if isinstance(model_or_pe, PositionalEncoding):
        return model_or_pe
    for path in (("pos",), ("model", "pos")):
        obj = model_or_pe
        for attr in path:
            obj = getattr(obj, attr, None)
        if isinstance(obj, PositionalEncoding):
            return obj
    raise TypeError(f"expected a PositionalEncoding or a model with one at .pos, got {type(model_or_pe).__name__}")


def parts_of(pe: PositionalEncoding) -> list[PositionalEncoding]:
    """The leaf encodings: the parts of a ``combo`` (recursively), else the encoding itself."""
    parts = getattr(pe, "parts", None)
    return [leaf for p in parts for leaf in parts_of(p)] if parts is not None else [pe]


def hooks_of(pe: PositionalEncoding) -> set[str]:
    """Names of the hooks the encoding overrides (the ones that are not no-ops)."""
    return {
        hook
        for part in parts_of(pe)
        for hook in HOOKS
        if getattr(type(part), hook) is not getattr(PositionalEncoding, hook)
    }


def depth_of(model: nn.Module) -> int:
    """The number of blocks of a model viz draws: vitpos's ViT and sequence model hold them at
    ``model.encoder.blocks``, a timm ViT converted by ``vitpos.integrations.timm.apply_encoding``
    (``model=timm`` runs) at ``model.blocks``."""
    encoder = getattr(model, "encoder", None)
    return len(encoder.blocks if encoder is not None else model.blocks)


def patch_of(model: nn.Module) -> tuple[int, int]:
    """The patch ``(height, width)`` in pixels of an image model: vitpos's ViT has a side
    (``model.patch_size``), a converted timm ViT a pair (``model.patch_embed.patch_size``)."""
    embed = getattr(model, "patch_embed", None)
    if embed is not None and hasattr(embed, "patch_size"):  # timm's PatchEmbed
        return tuple(embed.patch_size)
    return (model.patch_size, model.patch_size)


def device_of(module: nn.Module) -> torch.device:
    for t in module.parameters():
        return t.device
    for t in module.buffers():
        return t.device
    return torch.device("cpu")


@contextmanager
def evaluating(module: nn.Module):
    """Eval mode and no autograd for the duration, then the previous mode back."""
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            yield module
    finally:
        module.train(was_training)


def grid_size(grid: Grid) -> int:
    return math.prod(grid)


def as_2d(grid: Grid) -> tuple[int, int]:
    """A sequence of n tokens is drawn as a 1 x n grid."""
    return (1, grid[0]) if len(grid) == 1 else (grid[0], grid[1])


def center_index(grid: Grid) -> int:
    """Row-major index of the center token of the grid."""
    h, w = as_2d(grid)
    return (h // 2) * w + w // 2


def coordinates(grid: Grid) -> torch.Tensor:
    """(N, 2) row-major (row, column) coordinates of the grid tokens, float32."""
    h, w = as_2d(grid)
    ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    return torch.stack([ys.flatten(), xs.flatten()], -1).float()


def offset_average(values: torch.Tensor, grid: Grid) -> torch.Tensor:
    """Average pairwise values (..., N, N) [query, key] by their offset key - query.

    Returns (..., 2h-1, 2w-1): entry [dy + h-1, dx + w-1] is the mean over all
    pairs at that offset (each offset occurs at least once). For an encoding
    that depends on the offset only, this is exact.
    """
    h, w = as_2d(grid)
    c = coordinates(grid).long()
    rel = c[None, :, :] - c[:, None, :]  # (N, N, 2): key - query
    index = ((rel[..., 0] + h - 1) * (2 * w - 1) + rel[..., 1] + w - 1).flatten().to(values.device)  # (N*N,)
    flat = values.reshape(*values.shape[:-2], -1).float()  # (..., N*N)
    sums = torch.zeros(*flat.shape[:-1], (2 * h - 1) * (2 * w - 1), device=values.device).index_add_(-1, index, flat)
    counts = torch.bincount(index, minlength=sums.shape[-1]).float()
    return (sums / counts).reshape(*values.shape[:-2], 2 * h - 1, 2 * w - 1)


def display_images(images: torch.Tensor) -> np.ndarray:
    """(B, C, H, W) normalized images -> (B, H, W, 3) floats in [0, 1], each min-max scaled."""
    x = images.detach().float().cpu()
    lo = x.amin(dim=(1, 2, 3), keepdim=True)
    hi = x.amax(dim=(1, 2, 3), keepdim=True)
    x = (x - lo) / (hi - lo).clamp_min(1e-8)
    if x.shape[1] == 1:
        x = x.expand(-1, 3, -1, -1)
    return x[:, :3].permute(0, 2, 3, 1).numpy()
