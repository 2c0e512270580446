"""Spiral RoPE: the pairs of axial 2D RoPE turned along K evenly spread directions.

Liu et al., "Spiral RoPE: Rotate Your Rotary Positional Embeddings in the 2D Plane" (2026,
arXiv 2602.03227). The rotary pairs split into K groups (``directions``); a pair of group k with
frequency omega turns by the projection of the patch position (x column, y row) on its direction:

    angle = omega * (x cos phi_k + y sin phi_k),     phi_k = k pi / K,

omega log-spaced from ``max_freq`` down to ``min_freq`` (default: max_freq * base^(-4j/Dh),
j = 0 .. Dh/4 - 1, base 10000, EVA-02's spectrum rather than RoPE-ViT's base 100).

Conventions of the released code, huajianduzhuo-code/Spiral_RoPE ``RoPE_DeiT/rope.py`` (commit
4abece3b), with its script's defaults (``rotate=2``, i.e. K = 4; ``max_freq_lang=1.5``;
``same_theta=False``): pairs (2i, 2i+1); pair j of the first half of the pairs turns from the row
axis (phi = pi/2 - k pi/K), of the second half from the column axis (phi = -k pi/K), with the j-th
frequency and k = (j // 2) mod K/2; phi runs over (-pi/2, pi/2], the paper's k = 0 .. K-1 up to the
sign of the angle. Deliberate difference: that code turns the square angle map as an image
(``grid_sample``, border padding), which needs a square grid and clamps the corners; the formula
here is exact on any h x w grid. On 14 x 14 patches (head dim 64) the angle between two patches
agrees to 1.9e-6 rad where the turned map stays on the grid and differs by up to 2.55 rad in the
corners (tests/test_spiral_rope.py). That code always interpolates (``strategy=interpolate
align=ratio`` here; the default extrapolates, as the other RoPE); its ``truncate_percentage`` t is
``rotate_fraction`` 1 - t. Provenance and checks: docs/encodings.md#spiral-rope
"""

from __future__ import annotations

import math

import torch

from . import functional as fn
from .base import EncodingContext, OptionError, check_positive, register
from .rope import _LearnedFrequencies


def spiral_frequencies(head_dim: int, directions: int, max_freq: float, min_freq: float) -> torch.Tensor:
    """(Dh/2, 2) frequency vectors omega * (sin phi, cos phi) of the pairs, in the released code's
    order (see the module docstring): the angle at (x, y) is y * f[:, 0] + x * f[:, 1]."""
    quarter = head_dim // 4  # pairs per half
    j = torch.arange(quarter, dtype=torch.float64)
    omega = max_freq * (min_freq / max_freq) ** (j / (quarter - 1))  # (Dh/4,): max_freq down to min_freq
    turn = torch.div(j, 2, rounding_mode="floor") % (directions // 2) * math.pi / directions  # (Dh/4,)
    phi = torch.cat([math.pi / 2 - turn, -turn])  # (Dh/2,): from the row axis, then from the column axis
    unit = torch.stack([torch.sin(phi), torch.cos(phi)], -1)  # (Dh/2, 2): (row, column)
    unit = torch.where(unit.abs() < 1e-12, 0.0, unit)  # cos(pi/2) is 6e-17: the axes exactly
    return (omega.repeat(2)[:, None] * unit).float()


@register
class SpiralRoPE(_LearnedFrequencies):
    """Spiral RoPE on the 2D patch grid: axial RoPE's pairs turned along K evenly spread
    directions (see the module docstring)."""

    name = "rope_2d_spiral"
    grid_dims = (2,)
    rot_axes = 2

    def __init__(
        self,
        ctx: EncodingContext,
        strategy: str | None = None,
        directions: int = 4,
        max_freq: float = 1.5,
        min_freq: float | None = None,
        base: float = 10000.0,
        **kw,
    ):
        super().__init__(ctx, strategy, base=base, **kw)
        if isinstance(directions, bool) or not isinstance(directions, int) or directions < 2 or directions % 2:
            raise OptionError(
                "encoding.directions",
                f"encoding.directions must be an even integer >= 2, got {directions!r} "
                "(4: the paper's default; 2: axial RoPE)",
            )
        if ctx.head_dim % (4 * directions):
            raise OptionError(
                "encoding.directions",
                f"encoding.directions={directions} needs a head dim (model.dim / model.num_heads = "
                f"{ctx.dim}/{ctx.num_heads}) that is a multiple of {4 * directions} (4 x encoding.directions: "
                "every direction gets as many pairs); set fewer directions, or change model.dim or model.num_heads",
            )
        check_positive("max_freq", max_freq, "e.g. the released default, 1.5")
        check_positive("min_freq", min_freq, "null: max_freq * base^(-(Dh-4)/Dh)", allow_none=True)
        quarter = ctx.head_dim // 4
        lowest = max_freq * base ** (-(quarter - 1) / quarter) if min_freq is None else min_freq
        freqs = spiral_frequencies(ctx.head_dim, directions, max_freq, lowest)
        self.register_buffer("freqs", freqs, persistent=False)  # (Dh/2, 2): (row, column)
        self.directions, self.max_freq, self.min_freq = directions, max_freq, min_freq

    def rotation(self, grid, block, device):  # a fixed table: cached per grid, strategy and device
        return super(_LearnedFrequencies, self).rotation(grid, block, device)

    def build_rotation(self, grid, block, device):
        xs, ys = self.positions(grid, device)  # (N,), (N,)
        f = self.freqs.to(device)  # (Dh/2, 2)
        angles = ys[:, None] * f[None, :, 0] + xs[:, None] * f[None, :, 1]  # (N, Dh/2)
        return fn.rope_angles_to_complex(self.partial(angles))  # (N, Dh/2), or (H, N, Dh/2) with rotate_heads

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, directions={self.directions}, max_freq={self.max_freq}"
