"""Golden Gate RoPE: N-dimensional RoPE with fixed, evenly spread frequency directions.

Jerry Xiong, "On N-dimensional rotary positional embeddings" (2025,
jerryxio.ng/posts/nd-rope). Each head h and frequency f turns its pair by

    angle(h, f, p) = omega_f * <u_(h, f), p>,     p = (row, column) of the patch,

RoPE-Mixed's form (``rope_2d_mixed``) with nothing learned: the unit directions u are
quasi-random and evenly spread (the generalized golden ratio phi_d, x^(d+1) = x + 1: point
i of the sequence frac(i * phi_d^-k), k = 1..d, mapped through the inverse normal CDF and
normalized, so that heads and frequencies see every orientation), and the magnitudes
omega_f run log-spaced from ``min_freq`` to ``max_freq`` (a fraction ``zero_fraction``
of them set to 0: pairs that carry no position).

Checked against lucidrains/vit-pytorch ``vit_pytorch/vit_nd_rotary.py``
``GoldenGateRoPENd`` (commit 39fd9ac8), as its conventions: positions are the integer patch
coordinates, the pairs are (i, i + Dh/2) (``layout=half``), directions are drawn for
``heads * Dh/2`` points in head-major order, one table shared by every block (the reference
also builds one module for all its layers). Here the table is cached per grid; the class token
is not rotated; ``interpolate`` rescales the positions to the training extent (as RoPE-Mixed's),
``extrapolate`` keeps them. ``rotate_fraction`` counts all Dh/2 pairs as one spectrum and leaves
the slowest still, which here are the first pairs (omega rises along them).
Provenance and checks: docs/encodings.md#golden-gate-rope.
"""

from __future__ import annotations

import numbers

import torch

from . import functional as fn
from .base import EncodingContext, OptionError, check_positive, register
from .rope import _LearnedFrequencies


def golden_ratio(d: int) -> float:
    """phi_d, the positive root of x^(d+1) = x + 1 (phi_1 is the golden ratio), as the reference
    computes it: ten fixed-point steps from 2. phi_2, which sets the 2D directions, comes out
    3.7e-8 above the root (phi_1: 2.9e-6); the reference's value is kept, not the exact root."""
    x = 2.0
    for _ in range(10):
        x = (1.0 + x) ** (1.0 / (d + 1.0))
    return x


def golden_directions(n: int, d: int) -> torch.Tensor:
    """(n, d) unit vectors, evenly spread: the golden-ratio sequence through the inverse normal CDF."""
    alpha = golden_ratio(d) ** -torch.arange(1, d + 1, dtype=torch.float64)  # (d,)
    z = torch.fmod(torch.arange(1, n + 1, dtype=torch.float64)[:, None] * alpha, 1.0)  # (n, d) in [0, 1)
    gaussian = torch.erfinv(2.0 * z - 1.0)  # (n, d)
    return torch.nn.functional.normalize(gaussian, dim=-1).float()


@register
class GoldenGateRoPE(_LearnedFrequencies):
    """Golden Gate RoPE on the 2D patch grid (see the module docstring)."""

    name = "rope_2d_golden"
    grid_dims = (2,)
    rot_axes = 2

    def __init__(
        self,
        ctx: EncodingContext,
        strategy: str | None = None,
        min_freq: float = 1.0,
        max_freq: float = 10000.0,
        zero_fraction: float = 0.0,
        layout: str = "half",
        **kw,
    ):
        super().__init__(ctx, strategy, layout=layout, **kw)
        check_positive("min_freq", min_freq, "e.g. encoding.min_freq=1.0")
        check_positive("max_freq", max_freq, "e.g. encoding.max_freq=10000.0")
        if isinstance(zero_fraction, bool) or not isinstance(zero_fraction, numbers.Real) or not 0 <= zero_fraction < 1:
            message = f"must be a number in [0, 1), got {zero_fraction!r}"
            raise OptionError("zero_fraction", message, "e.g. 0.0")
        pairs = ctx.head_dim // 2
        zeros = round(zero_fraction * pairs)
        omega = torch.cat([torch.zeros(zeros), min_freq * (max_freq / min_freq) ** torch.linspace(0, 1, pairs - zeros)])
        directions = golden_directions(ctx.num_heads * pairs, 2).reshape(ctx.num_heads, pairs, 2)  # (H, Dh/2, 2)
        self.register_buffer("freqs", directions * omega[:, None], persistent=False)  # (H, Dh/2, 2): (row, column)
        self.min_freq, self.max_freq, self.zero_fraction = min_freq, max_freq, zero_fraction
        self.keep_fastest(omega)  # omega rises along the pairs: the first pairs are the slowest here

    def pair_groups(self) -> int:  # one spectrum over all the pairs, no axes: rotate_fraction counts them all
        return 1

    def rotation(self, grid, block, device):  # a fixed table: cached per grid, strategy and device
        return super(_LearnedFrequencies, self).rotation(grid, block, device)

    def build_rotation(self, grid, block, device):
        xs, ys = self.positions(grid, device)  # (N,), (N,)
        f = self.freqs.to(device)  # (H, Dh/2, 2)
        angles = ys[None, :, None] * f[:, None, :, 0] + xs[None, :, None] * f[:, None, :, 1]  # (H, N, Dh/2)
        return fn.rope_angles_to_complex(self.partial(angles))  # (H, N, Dh/2)
