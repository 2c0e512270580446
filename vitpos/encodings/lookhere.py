"""LookHere (Fuller et al., NeurIPS 2024): directed attention heads with a distance penalty.

Each head looks one way: a query attends only to keys in its head's field of view (a cone of ``fov``
degrees around the head's direction) and pays a penalty proportional to the Euclidean distance between
the two patches; "free" heads have no direction, only the penalty (2D-ALiBi). Nothing is learned or
added to the tokens; the bias depends on the offset only, so any grid works as is (strategy
``extrapolate``, the only one). For block l and head h, query i and key j (offset p_j - p_i)::

    bias = -g * s_l * s_h * ||p_j - p_i||   if j is in head h's field of view of i
           masked (a large negative)        otherwise

Conventions (the authors' ``lookhere.py``): image directions ("up" looks towards row 0); closed regions
(a query sees itself and keys on a boundary line); distance in patches; g = 2, layer slopes s_l linear
from 1.5 to 0.5, directed heads 1/2 halved at each repeat of a group of four directions, free heads
1/4, 1/16, 1/64, 1/256; the class token neither masked nor penalized. ``fov`` 180 (default), 90 or 45
picks the head directions of the paper's LH-180, LH-90, LH-45 (``LAYOUTS`` below).

Deliberate differences: any number of heads (``free_heads`` defaults to H // 3, the directed heads are
the rest rounded down to an even number and take the directions in order, cycling: 12 heads is the
paper's layout); free slopes continue 4^-k past the fourth; the masked value is ``finfo(dtype).min / 2``
(room to add a second bias); the penalty is built in float32 and cast to the compute dtype; only the
default linear distance and "inf" fill; the bias is built on first use per grid and cached.

Provenance and checks: docs/encodings.md#lookhere
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .base import EncodingContext, Grid, GridCache, OptionError, PositionalEncoding, check_positive, register
from .functional import key_offsets_2d, pad_prefix

# Directions per field of view, ordered so that each pair is opposite; the first four are the
# authors' first group (halves, corners, eighths1 paired with its opposite), the next four the second.
LAYOUTS: dict[int, tuple[float, ...]] = {
    180: (90.0, 270.0, 180.0, 0.0, 45.0, 225.0, 135.0, 315.0),
    90: (135.0, 315.0, 45.0, 225.0, 90.0, 270.0, 180.0, 0.0),
    45: (112.5, 292.5, 247.5, 67.5, 157.5, 337.5, 22.5, 202.5),
}
DIRECTED_SLOPE = 0.5  # a directed head's slope, halved at each repeat of its direction


def field_of_view(offsets: torch.Tensor, angle: float | None, fov: float) -> torch.Tensor:
    """(N, N) bool: key j lies in the closed cone of ``fov`` degrees around ``angle``, seen from query i.

    offsets: (N, N, 2) (dy, dx) = p_key - p_query with rows growing downwards.
    ``angle`` in degrees, counterclockwise from "right" (up = 90); None: every key.
    The query's own position (offset 0) is always inside.
    """
    if angle is None:
        return torch.ones(offsets.shape[:2], dtype=torch.bool)
    off = offsets.double()
    x, y = off[..., 1], -off[..., 0]  # y up
    along = x * math.cos(math.radians(angle)) + y * math.sin(math.radians(angle))  # projection on the direction
    # inside iff the angle to the direction is <= fov/2; 1e-9: boundary rays (rows, columns, diagonals) are inside
    return along >= torch.hypot(x, y) * math.cos(math.radians(fov / 2)) - 1e-9


def head_layout(num_heads: int, fov: int, free_heads: int | None = None) -> tuple[list[float | None], list[float]]:
    """Per head: its direction (degrees; None for a free head) and its head slope (see the module docstring)."""
    if free_heads is None:
        free_heads = num_heads - 2 * ((num_heads - num_heads // 3) // 2)
    directions = LAYOUTS[fov]
    angles: list[float | None] = [directions[i % len(directions)] for i in range(num_heads - free_heads)]
    slopes = [DIRECTED_SLOPE * 0.5 ** (i // len(directions)) for i in range(len(angles))]
    angles += [None] * free_heads
    slopes += [4.0 ** -(k + 1) for k in range(free_heads)]
    return angles, slopes


def lookhere_penalty(h: int, w: int, slopes: torch.Tensor) -> torch.Tensor:
    """(..., N, N) float32 -slope * ||p_j - p_i|| for slopes (...,) on a row-major h x w grid."""
    distance = key_offsets_2d(h, w).norm(dim=-1)  # (N, N)
    return -slopes.float()[..., None, None] * distance


def lookhere_visible(h: int, w: int, angles: Sequence[float | None], fov: float) -> torch.Tensor:
    """(H, N, N) bool: which keys each head's query may see on a row-major h x w grid."""
    offsets = key_offsets_2d(h, w)
    return torch.stack([field_of_view(offsets, a, fov) for a in angles])


@register
class LookHere(PositionalEncoding):
    """Directed heads (a field of view each) plus a Euclidean distance penalty
    whose slope varies per head and per block. See the module docstring for the
    conventions and the differences from the authors' code.

    Options: ``fov`` 180 (default, LH-180) | 90 | 45; ``global_slope`` (2);
    ``layer_slopes`` [first block, last block] (1.5, 0.5); ``free_heads``
    (null: H // 3, directed heads rounded to an even number).
    """

    name = "lookhere"
    grid_dims = (2,)
    strategies = ("extrapolate",)

    def __init__(
        self,
        ctx: EncodingContext,
        strategy: str | None = None,
        fov: int = 180,
        global_slope: float = 2.0,
        layer_slopes: Sequence[float] = (1.5, 0.5),
        free_heads: int | None = None,
    ):
        super().__init__(ctx, strategy)
        if fov not in LAYOUTS:
            raise OptionError(
                "fov", f"unknown fov {fov!r} for encoding 'lookhere'; valid: 180, 90, 45 (encoding.fov=...)"
            )
        check_positive("global_slope", global_slope, "e.g. the authors' 2.0")
        is_pair = isinstance(layer_slopes, Sequence) and not isinstance(layer_slopes, str) and len(layer_slopes) == 2
        if not is_pair:
            raise OptionError(
                "layer_slopes",
                f"encoding.layer_slopes takes [first block, last block], got {layer_slopes!r} "
                "(e.g. the authors' [1.5, 0.5])",
            )
        for s in layer_slopes:
            check_positive("layer_slopes", s, "e.g. the authors' [1.5, 0.5]")
        if free_heads is not None and (
            isinstance(free_heads, bool) or not isinstance(free_heads, int) or not 0 <= free_heads <= ctx.num_heads
        ):
            raise OptionError(
                "free_heads",
                f"encoding.free_heads must be an integer in [0, model.num_heads={ctx.num_heads}] or null, "
                f"got {free_heads!r} (null: num_heads // 3)",
            )
        self.fov, self.global_slope, self.layer_slopes = fov, float(global_slope), [float(s) for s in layer_slopes]
        self.angles, head_slopes = head_layout(ctx.num_heads, fov, free_heads)
        layer = torch.linspace(self.layer_slopes[0], self.layer_slopes[1], ctx.depth)  # (depth,)
        slopes = self.global_slope * layer[:, None] * torch.tensor(head_slopes)[None, :]  # (depth, H)
        self.register_buffer("slopes", slopes, persistent=False)
        self._tables = GridCache()

    def biases(self, grid: Grid, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        """One (H, P + N, P + N) bias per block, built together once per grid/device/dtype."""
        h, w = grid

        def build() -> tuple[torch.Tensor, ...]:
            penalty = lookhere_penalty(h, w, self.slopes.cpu())  # (depth, H, N, N) float32
            hidden = ~lookhere_visible(h, w, self.angles, self.fov)  # (H, N, N)
            # filled after the cast: float32's min/2 would turn into -inf in float16
            bias = penalty.to(dtype).masked_fill(hidden, torch.finfo(dtype).min / 2)
            return pad_prefix(bias, self.num_prefix_tokens).to(device).unbind(0)  # class token: zero rows/columns

        return self._tables.get(build, grid, device, dtype=dtype)

    def attention_bias(self, grid: Grid, block: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """(H, P + N, P + N) for block ``block``."""
        return self.biases(grid, device, dtype)[block]

    def no_weight_decay(self) -> set[str]:
        return set()  # no parameters

    def extra_repr(self) -> str:
        heads = ["free" if a is None else f"{a:g}" for a in self.angles]
        return (
            f"{super().extra_repr()}, fov={self.fov}, heads={heads}, global_slope={self.global_slope:g}, "
            f"layer_slopes={self.layer_slopes}"
        )
