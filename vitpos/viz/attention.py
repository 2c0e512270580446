"""Pictures of what a model attends to, on real (or random) images.

Both use ``VisionTransformer.attention_maps(images)``: the explicit softmax
attention (B, H, P + N, P + N) of every block, prefix (class) tokens first.
"""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.patches import Rectangle

from .render import (
    center_index,
    coordinates,
    depth_of,
    device_of,
    display_images,
    evaluating,
    new_figure,
    to_image,
)


def _attention(model, images: torch.Tensor) -> tuple[list[torch.Tensor], tuple[int, int], int]:
    """Per-block attention (B, H, P + N, P + N) in float32, the grid, the number of prefix tokens."""
    with evaluating(model):
        images = images.to(device_of(model))
        maps = [a.float() for a in model.attention_maps(images)]
    return maps, model.grid_for(images), model.num_prefix_tokens


def attention_maps_data(model, images: torch.Tensor, block: int = -1) -> tuple[np.ndarray, str]:
    """Attention (B, H, h, w) of one query over the patch grid in ``block``: the
    class token's if the model has one, else the center patch's. Returns the
    maps and a description of the query."""
    maps, grid, p = _attention(model, images)
    attn = maps[block]  # (B, H, P + N, P + N)
    query, who = (0, "class token") if p else (p + center_index(grid), "center patch")
    return attn[:, :, query, p:].reshape(*attn.shape[:2], *grid).cpu().numpy(), who


def attention_maps(model, images: torch.Tensor, n_images: int = 4, block: int = -1) -> np.ndarray:
    """For up to ``n_images`` images (rows): the image, then per head (columns)
    where one query looks in ``block`` (default the last), overlaid on the image.
    The query is the class token if the model has one, else the center patch
    (boxed). Attention over the prefix token itself is not drawn."""
    images = images[:n_images]
    data, who = attention_maps_data(model, images, block)  # (B, H, h, w)
    grid = data.shape[-2:]
    pics = display_images(images)  # (B, H_img, W_img, 3)
    b, heads = data.shape[:2]
    depth = depth_of(model)
    fig, axes = new_figure(b, heads + 1, f"attention of the {who}, block {block % depth}", 1.6, 0.2)
    height, width = pics.shape[1:3]
    extent = [-0.5, width - 0.5, height - 0.5, -0.5]
    ph, pw = height / grid[0], width / grid[1]
    for i in range(b):
        axes[i, 0].imshow(pics[i])
        axes[i, 0].set_title("image" if i == 0 else "", fontsize="small")
        for hd in range(heads):
            ax = axes[i, hd + 1]
            ax.imshow(pics[i].mean(-1), cmap="gray", extent=extent)
            ax.imshow(data[i, hd], cmap="inferno", alpha=0.65, extent=extent, interpolation="nearest")
            if who == "center patch":
                cy, cx = grid[0] // 2, grid[1] // 2
                ax.add_patch(_box(cx * pw - 0.5, cy * ph - 0.5, pw, ph))
            if i == 0:
                ax.set_title(f"head {hd}", fontsize="small")
    for ax in axes.flat:
        ax.set_axis_off()
    return to_image(fig)


def _box(x: float, y: float, w: float, h: float) -> Rectangle:
    return Rectangle((x, y), w, h, fill=False, edgecolor="cyan", linewidth=1.0)


def attention_distance_data(model, images: torch.Tensor) -> np.ndarray:
    """Mean attention distance (depth, H) in patches: for every patch query, the
    distance to each patch key weighted by the attention it gets, averaged over
    queries and images (the "attention distance" of the ViT paper, Dosovitskiy
    et al. 2021, Figure 7 right, measured there in pixels: multiply by the patch
    size). Attention to prefix tokens is left out and the rest renormalized."""
    maps, grid, p = _attention(model, images)
    c = coordinates(grid).to(maps[0].device)
    dist = torch.cdist(c, c)  # (N, N) Euclidean, in patches
    out = []
    for attn in maps:
        a = attn[:, :, p:, p:]  # (B, H, N, N) patch queries over patch keys
        a = a / a.sum(-1, keepdim=True).clamp_min(1e-12)
        out.append((a * dist).sum(-1).mean(dim=(0, 2)))  # (H,)
    return torch.stack(out).cpu().numpy()  # (depth, H)


def mean_attention_distance(model, images: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """The numbers (depth, H) of :func:`attention_distance_data` and their plot:
    one dot per head at every block, as Figure 7 (right) of the ViT paper. The
    dashed line is the distance under uniform attention over the grid: heads
    below it look locally, heads near it globally."""
    dist = attention_distance_data(model, images)
    grid = model.grid_for(images)
    c = coordinates(grid)
    uniform = float(torch.cdist(c, c).mean())
    depth, heads = dist.shape
    fig, axes = new_figure(1, 1, "mean attention distance", 4.0, 0.4)
    ax = axes[0, 0]
    for hd in range(heads):
        ax.scatter(np.arange(depth), dist[:, hd], s=18, label=f"head {hd}")
    ax.axhline(uniform, color="0.5", ls="--", lw=1, label="uniform attention")
    ax.set(xlabel="block", ylabel="mean attention distance (patches)", ylim=(0, max(uniform, float(dist.max())) * 1.1))
    ax.set_xticks(range(depth))
    ax.legend(fontsize="x-small", ncol=2)
    return dist, to_image(fig)
