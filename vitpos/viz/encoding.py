"""Pictures of what an encoding does by itself, before any image is seen.

Each picture has a ``*_data`` twin returning the numbers it draws, so that
tests can check the math and users can plot it their own way. Every function
takes an encoding or a model holding one (``model.pos``), and a token grid
(default: the encoding's training grid).
"""

from __future__ import annotations

import matplotlib
import numpy as np
import torch
import torch.nn.functional as F

from vitpos.encodings import Grid
from vitpos.encodings.rope import RoPE2DMixed

from .render import (
    as_2d,
    center_index,
    colour_scale,
    device_of,
    encoding_of,
    grid_size,
    hooks_of,
    new_figure,
    offset_average,
    parts_of,
    to_image,
)


# ------------------------------------------------------------ absolute tables
def position_table(model_or_pe, grid: Grid | None = None) -> torch.Tensor:
    """The (N, D) vectors the encoding adds to the tokens of ``grid``.

    Computed through the hook itself, ``add_to_tokens(zeros)``, so it works for
    learned and fixed tables, under any strategy, and for the absolute part of
    a ``combo`` alike.
    """
    pe = encoding_of(model_or_pe)
    grid = tuple(grid or pe.train_grid)
    zeros = torch.zeros(1, grid_size(grid), pe.ctx.dim, device=device_of(pe))
    with torch.no_grad():
        table = pe.add_to_tokens(zeros, grid)[0].float()  # (N, D)
    if not table.abs().amax() > 0:
        raise ValueError(
            f"encoding '{pe.name}' adds nothing to the tokens, so it has no position table to draw; "
            "position_similarity and table_heatmap apply to absolute encodings (learned_*, sincos_*, combos with one)"
        )
    return table


def position_similarity_data(model_or_pe, grid: Grid | None = None) -> np.ndarray:
    """Cosine similarity of every position's vector with every other one:
    (h, w, h, w) on images ([i, j] is the tile of position (i, j)), (n, n) on sequences."""
    pe = encoding_of(model_or_pe)
    grid = tuple(grid or pe.train_grid)
    t = F.normalize(position_table(pe, grid), dim=-1)
    return (t @ t.T).reshape(*grid, *grid).cpu().numpy()


def position_similarity(model_or_pe, grid: Grid | None = None) -> np.ndarray:
    """Cosine similarity of position embeddings, drawn as an h x w grid of h x w
    tiles: tile (i, j) shows how similar position (i, j) is to every other one.

    This is Figure 7 (center) of the ViT paper (Dosovitskiy et al. 2021): trained
    learned embeddings show row/column structure, and closer patches have more
    similar embeddings. On sequences, the (n, n) similarity matrix.
    """
    pe = encoding_of(model_or_pe)
    grid = tuple(grid or pe.train_grid)
    sim = position_similarity_data(pe, grid)
    fig, axes = new_figure(1, 1, f"position embedding similarity: {pe.name}, grid {'x'.join(map(str, grid))}", 4.2)
    ax = axes[0, 0]
    vmin, vmax, cmap, scale = colour_scale(sim)
    if len(grid) == 1:
        im = ax.imshow(sim, cmap=cmap, vmin=vmin, vmax=vmax)
        ax.set(xlabel="position", ylabel="position")
    else:
        h, w = grid
        mosaic = np.full((h * (h + 1) - 1, w * (w + 1) - 1), np.nan)  # one empty pixel between tiles
        for i in range(h):
            for j in range(w):
                mosaic[i * (h + 1) : i * (h + 1) + h, j * (w + 1) : j * (w + 1) + w] = sim[i, j]
        im = ax.imshow(mosaic, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest")
        ax.set_xticks([j * (w + 1) + (w - 1) / 2 for j in range(w)], [str(j + 1) for j in range(w)], fontsize=6)
        ax.set_yticks([i * (h + 1) + (h - 1) / 2 for i in range(h)], [str(i + 1) for i in range(h)], fontsize=6)
        ax.set(xlabel="input patch column", ylabel="input patch row")
    fig.colorbar(im, ax=ax, shrink=0.8, label=f"cosine similarity ({scale})")
    return to_image(fig)


def table_heatmap(model_or_pe, grid: Grid | None = None) -> np.ndarray:
    """The (N, D) table added to the tokens as a heatmap: rows are positions
    (row-major), columns channels. Sinusoids show as stripes of falling frequency."""
    pe = encoding_of(model_or_pe)
    grid = tuple(grid or pe.train_grid)
    table = position_table(pe, grid).cpu().numpy()
    fig, axes = new_figure(1, 1, f"position table: {pe.name}, grid {'x'.join(map(str, grid))}", 4.2, 1.2)
    vmin, vmax, cmap, scale = colour_scale(table)
    im = axes[0, 0].imshow(table, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    axes[0, 0].set(xlabel="channel", ylabel="position (row-major)")
    fig.colorbar(im, ax=axes[0, 0], shrink=0.8, label=f"value ({scale})")
    return to_image(fig)


# ------------------------------------------------------------------------ RoPE
def rope_logit_data(
    model_or_pe, grid: Grid | None = None, block: int = 0, vector: str = "ones", samples: int = 64, seed: int = 0
) -> np.ndarray:
    """Logit q(p0) . k(p) / sqrt(Dh) after rotation, as a function of the offset p - p0.

    The same query and key vector is placed at every position and rotated by
    ``pe.rotate_qk``; ``vector='ones'`` uses all-ones, ``'random'`` averages over
    ``samples`` Gaussian vectors (q = k). Pairs are averaged per offset, so the
    full offset range is shown. Returns (H, 2h-1, 2w-1) on images, (H, 2n-1) on
    sequences; the center entry is offset 0.
    """
    pe = encoding_of(model_or_pe)
    if "rotate_qk" not in hooks_of(pe):
        raise ValueError(f"encoding '{pe.name}' does not rotate q and k; rope_logit_vs_offset applies to rope_*")
    grid = tuple(grid or pe.train_grid)
    heads, dh, p, n = pe.ctx.num_heads, pe.ctx.head_dim, pe.num_prefix_tokens, grid_size(grid)
    device = device_of(pe)
    if vector == "ones":
        v = torch.ones(1, heads, 1, dh, device=device)
    elif vector == "random":
        gen = torch.Generator().manual_seed(seed)
        v = torch.randn(samples, heads, 1, dh, generator=gen).to(device)
    else:
        raise ValueError(f"unknown vector '{vector}'; valid: ones, random")
    q = v.expand(-1, -1, p + n, -1).contiguous()  # (S, H, P + N, Dh)
    with torch.no_grad():
        q, k = pe.rotate_qk(q, q.clone(), grid, block)
        scale = q.shape[-1] ** -0.5  # SDPA's, also for q/k widened with extra channels (pape)
        logits = (q[:, :, p:].float() @ k[:, :, p:].float().transpose(-2, -1)).mean(0) * scale  # (H, N, N)
    out = offset_average(logits, grid).cpu().numpy()  # (H, 2h-1, 2w-1)
    return out[:, 0] if len(grid) == 1 else out


def _offset_panels(maps: np.ndarray, grid: Grid, title: str, what: str) -> np.ndarray:
    """Draw (blocks, H, ...) maps over offsets: full offset maps (2h-1, 2w-1) or
    maps over the grid seen from its center token (h, w). Images: one panel per
    block (row) and head (column); sequences: one panel per block, a line per head."""
    blocks, heads = maps.shape[:2]
    h, w = as_2d(grid)
    full = maps.shape[-1] == 2 * w - 1 and w > 1
    cy, cx = (h - 1, w - 1) if full else (h // 2, w // 2)  # where offset 0 is
    if len(grid) == 1:
        fig, axes = new_figure(1, blocks, title)
        for b in range(blocks):
            ax = axes[0, b]
            for hd in range(heads):
                ax.plot(np.arange(maps.shape[-1]) - cx, maps[b, hd], label=f"head {hd}")
            ax.set(title=f"block {b}", xlabel="offset (key - query)", ylabel=what)
            ax.legend(fontsize="x-small")
        return to_image(fig)
    fig, axes = new_figure(blocks, heads, title)
    rows, cols = maps.shape[-2:]
    extent = [-cx - 0.5, cols - cx - 0.5, rows - cy - 0.5, -cy - 0.5]  # axes in offsets dx (right), dy (down)
    vmin, vmax, cmap, scale = colour_scale(maps)
    for b in range(blocks):
        for hd in range(heads):
            ax = axes[b, hd]
            im = ax.imshow(maps[b, hd], cmap=cmap, vmin=vmin, vmax=vmax, extent=extent, interpolation="nearest")
            ax.set_title(f"block {b}, head {hd}", fontsize="small")
            ax.tick_params(labelsize=6)
    axes[-1, 0].set(xlabel="dx", ylabel="dy")
    fig.colorbar(im, ax=axes, shrink=0.8, label=f"{what} ({scale})")
    return to_image(fig)


def rope_logit_vs_offset(model_or_pe, grid: Grid | None = None, blocks=(0,), vector: str = "ones") -> np.ndarray:
    """RoPE's effect on attention by itself: the logit of one query/key vector
    pair as a function of their 2D offset (dx right, dy down), per head. With
    all-ones vectors it peaks at offset 0 and falls off (with ripples) with
    distance; the learned variants can tilt it along diagonals."""
    pe = encoding_of(model_or_pe)
    grid = tuple(grid or pe.train_grid)
    maps = np.stack([rope_logit_data(pe, grid, b, vector) for b in blocks])  # (blocks, H, ...)
    return _offset_panels(maps, grid, f"RoPE logit vs offset (q = k = {vector}): {pe.name}", "q.k / sqrt(Dh)")


def rope_mixed_directions(model_or_pe) -> np.ndarray:
    """RoPE-Mixed's learned 2D frequency vectors (fx, fy) as arrows from the
    origin, one panel per head, colored by block (Heo et al. 2024): a pair turns
    fastest along its arrow's direction, with period 2 pi / length in patches."""
    parts = [p for p in parts_of(encoding_of(model_or_pe)) if isinstance(p, RoPE2DMixed)]
    if not parts:
        raise ValueError("rope_mixed_directions needs an encoding with a rope_2d_mixed part")
    freqs = parts[0].freqs.detach().float().cpu().numpy()  # (depth, H, Dh/2, 2)
    depth, heads = freqs.shape[:2]
    fig, axes = new_figure(1, heads, "RoPE-Mixed frequencies (fx, fy), color = block", 2.4)
    lim = 1.1 * float(np.abs(freqs).max())
    colors = [(b / max(depth - 1, 1)) for b in range(depth)]
    for hd in range(heads):
        ax = axes[0, hd]
        for b in range(depth):
            f = freqs[b, hd]
            zero = np.zeros(len(f))
            ax.quiver(zero, zero, f[:, 0], f[:, 1], angles="xy", scale_units="xy", scale=1, width=0.006,
                      color=matplotlib.colormaps["viridis"](colors[b]), label=f"block {b}")  # fmt: skip
        ax.set(xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal", title=f"head {hd}", xlabel="fx")
        ax.axhline(0, color="0.8", lw=0.5)
        ax.axvline(0, color="0.8", lw=0.5)
    axes[0, 0].set_ylabel("fy")
    axes[0, -1].legend(fontsize="xx-small", loc="upper right")
    return to_image(fig)


# -------------------------------------------------------------- logit biases
def bias_data(model_or_pe, grid: Grid | None = None, block: int = 0) -> np.ndarray:
    """The attention bias the encoding adds for the center query, over all keys:
    (H, h, w) on images, (H, n) on sequences (prefix tokens left out)."""
    pe = encoding_of(model_or_pe)
    grid = tuple(grid or pe.train_grid)
    with torch.no_grad():
        bias = pe.attention_bias(grid, block, device_of(pe), torch.float32)
    if bias is None:
        raise ValueError(f"encoding '{pe.name}' adds no attention bias; bias_vs_offset applies to rel_bias_*, alibi")
    bias = bias if bias.dim() == 3 else bias[None]  # (H, P + N, P + N)
    p = pe.num_prefix_tokens
    row = bias[:, p + center_index(grid), p:].float()  # (H, N)
    return row.reshape(-1, *grid).cpu().numpy()


def bias_vs_offset(model_or_pe, grid: Grid | None = None, blocks=(0,)) -> np.ndarray:
    """The additive logit bias from the center token to every other token,
    per head (columns) and block (rows): Swin-style tables show what each head
    learned to prefer; ALiBi shows its fixed linear slopes."""
    pe = encoding_of(model_or_pe)
    grid = tuple(grid or pe.train_grid)
    maps = np.stack([bias_data(pe, grid, b) for b in blocks])  # (blocks, H, ...)
    return _offset_panels(maps, grid, f"attention bias from the center token: {pe.name}", "bias")
