"""Spiral RoPE: the pairs of axial 2D RoPE turned along K evenly spread directions.

Liu et al., "Spiral RoPE: Rotate Your Rotary Positional Embeddings in the 2D Plane" (2026,
arXiv 2602.03227). The rotary pairs split into K groups (``directions``); a pair of group k with
frequency omega turns by the projection of the patch position (x column, y row) on its direction:

    angle = omega * (x cos phi_k + y sin phi_k),     phi_k = k pi / K,

omega log-spaced from ``max_freq`` down to ``min_freq`` (default: max_freq * base^(-4j/Dh),
j = 0 .. Dh/4 - 1, base 10000, EVA-02's spectrum rather than RoPE-ViT's base 100).

Conventions of the released code (huajianduzhuo-code/Spiral_RoPE @ 4abece3b ``RoPE_DeiT/rope.py``,
``models_v2.py``), with its script's defaults: K = 4, ``max_freq_lang=1.5`` (the value
``run_all.sh`` sets; its help text says 0.5); pairs (2i, 2i+1); pair j of the first half turns from
the row axis (phi = pi/2 - k pi/K), of the second half from the column axis (phi = -k pi/K), with
k = (j // 2) mod K/2. The position turns about the grid's centre c: angle = omega_k . (p - c) +
omega_0 . c (omega_0: the direction before the turn), so the class token, never rotated, meets each
patch at the released model's phase (``model.pool=cls``); between patches the constant cancels.
``truncate_percentage`` t is the released option: int(n t) of the n frequencies per half, the
lowest, stay still (``rotate_fraction`` 1 - t: ceil(t n)). Deliberate difference: that code turns
the square angle map as an image (``grid_sample``, border padding: square grids, clamped corners);
the formula here is exact on any h x w grid. That code always interpolates (``strategy=interpolate
align=ratio`` here; the default extrapolates). Provenance, measured gaps: docs/encodings.md#spiral-rope
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


def truncated_pairs(n: int, t, fraction) -> int:
    """How many of the ``n`` frequencies of each half ``truncate_percentage`` ``t`` leaves still: the
    released int(n * t); an :class:`OptionError` for a t that is no fraction, that leaves none still
    (there ``freqs[-0:] = 0`` stops every pair), or that comes with a ``rotate_fraction`` too."""
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t < 1:
        raise OptionError(
            "truncate_percentage",
            f"encoding.truncate_percentage must be a number in [0, 1), got {t!r} "
            "(0: every pair turns; 0.25: the lowest quarter of the frequencies stay still)",
        )
    still = int(n * t)
    if t and not still:
        raise OptionError(
            "truncate_percentage",
            f"encoding.truncate_percentage={t} leaves int({t} * {n}) = 0 of the {n} frequencies per half still "
            f"(the released code then stops them all); set 0, or at least {1 / n:.3g}",
        )
    if t and fraction != 1:
        raise OptionError(
            "truncate_percentage",
            f"encoding.truncate_percentage={t} and encoding.rotate_fraction={fraction} both choose the still pairs; "
            "set only one of them",
        )
    return still


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
        truncate_percentage: float = 0.0,
        **kw,
    ):
        super().__init__(ctx, strategy, base=base, **kw)
        still = truncated_pairs(ctx.head_dim // 4, truncate_percentage, self.rotate_fraction)
        if isinstance(directions, bool) or not isinstance(directions, int) or directions < 2 or directions % 2:
            raise OptionError(
                "directions",
                f"encoding.directions must be an even integer >= 2, got {directions!r} "
                "(4: the paper's default; 2: axial RoPE)",
            )
        if ctx.head_dim % (4 * directions):
            raise OptionError(
                "directions",
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
        axial = spiral_frequencies(ctx.head_dim, 2, max_freq, lowest)  # the same pairs before the turn
        self.register_buffer("axial", axial, persistent=False)  # (Dh/2, 2): (row, column)
        self.directions, self.max_freq, self.min_freq = directions, max_freq, min_freq
        self.truncate_percentage = truncate_percentage
        if still:  # the released truncation: the lowest int(n t) of each half stay still
            self.keep_fastest(freqs.norm(dim=-1), kept=ctx.head_dim // 4 - still)

    def rotation(self, grid, block, device):  # a fixed table: cached per grid, strategy and device
        return super(_LearnedFrequencies, self).rotation(grid, block, device)

    def build_rotation(self, grid, block, device):
        xs, ys = self.positions(grid, device)  # (N,), (N,), row-major: the first and last patch are corners
        f, axial = self.freqs.to(device), self.axial.to(device)  # (Dh/2, 2), (Dh/2, 2)
        cy, cx = (ys[0] + ys[-1]) / 2, (xs[0] + xs[-1]) / 2  # the grid's centre, as the positions run
        phase = cy * axial[:, 0] + cx * axial[:, 1]  # (Dh/2,): the angle at the centre before the turn
        angles = (ys[:, None] - cy) * f[None, :, 0] + (xs[:, None] - cx) * f[None, :, 1] + phase  # (N, Dh/2)
        return fn.rope_angles_to_complex(self.partial(angles))  # (N, Dh/2), or (H, N, Dh/2) with rotate_heads

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, directions={self.directions}, max_freq={self.max_freq}"
