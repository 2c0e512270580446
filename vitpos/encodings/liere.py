"""LieRE (Ostmeier et al., ICML 2025): rotations exp(sum_a p_a A_a) from learned Lie-algebra generators.

A token at position p = (p_0, p_1) (row, column) turns each block of ``b`` contiguous channels of q and
k by::

    R(p) = exp(p_0 A_0 + p_1 A_1),  A_a learned skew-symmetric b x b, per block, head and layer

with b the whole head width by default (a dense rotation of the head). Not exactly relative: A_0 and
A_1 need not commute, so R(p)^T R(p') is not a function of p' - p; it is when they commute (A_1 = 0,
A_1 = c A_0, or b = 2: RoPE-Mixed). Cost: one dense b x b matrix_exp per token, head and block, the
slowest encoding here with b the head width; ``block_size=8`` is far cheaper.

Conventions (the authors' ``rope_vit.py``): A = U - U^T, U = triu(raw, 1), raw ~ U[0, 2 pi); per layer
and head; positions the cartesian product (rows first) of linspace(0, n / n_train, n); the class token
gets the zero generator (never rotated); x' = R x on chunks of b contiguous channels, the same R for q
and k. Strategies: ``proportional`` (default, the reference), ``interpolate`` (linspace(0, 1, n)) and
``extrapolate`` (i / (n_train - 1): exactly the training spacing).

Deliberate differences: block l uses its own generators (the reference's loop reuses layer 0's); any
head dim that ``block_size`` divides; only the strict upper triangle is stored; one batched
matrix_exp in float32 (also under autocast), cached per grid and parameter version in evaluation.

Provenance and checks: docs/encodings.md#liere
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import nn

from .base import EncodingContext, Grid, OptionError, register
from .comrope import BlockRotaryBase, check_block_size
from .functional import grid_points, packed_skew, skew_index
from .symbolic_sizes import linspace


@register
class LieRE(BlockRotaryBase):
    """LieRE: R(p) = exp(p_0 A_0 + p_1 A_1), learned skew-symmetric generators per
    axis, block, head and layer. See the module docstring (not exactly relative).

    Options: ``block_size`` (null: the head width, as the authors); ``init_range``:
    generator entries start ~ U[0, init_range) (2 pi).
    """

    name = "liere"
    strategies = ("proportional", "interpolate", "extrapolate")

    def __init__(
        self,
        ctx: EncodingContext,
        strategy: str | None = None,
        block_size: int | None = None,
        init_range: float = 2 * math.pi,
    ):
        super().__init__(ctx, strategy)
        b = ctx.head_dim if block_size is None else block_size
        self.block_size = check_block_size(self.name, b, ctx.head_dim, 1, "null: the whole head, as the authors")
        if isinstance(init_range, bool) or not isinstance(init_range, numbers.Real) or not init_range >= 0:
            raise OptionError("init_range", f"encoding.init_range must be >= 0, got {init_range!r} (default 2 pi)")
        self.init_range = float(init_range)
        m, b = ctx.head_dim // self.block_size, self.block_size
        # the strictly upper triangle of each generator: (depth, H, axes, m, b(b-1)/2)
        self.generators = nn.Parameter(torch.rand(ctx.depth, ctx.num_heads, 2, m, b * (b - 1) // 2) * init_range)
        self.register_buffer("skew_index", skew_index(b), persistent=False)

    def coordinates(self, grid: Grid) -> torch.Tensor:
        """(N, 2) float32 (row, column) positions of the row-major grid tokens."""
        axes = []
        for n, nt in zip(grid, self.train_grid):
            if self.strategy == "proportional":
                axes.append(linspace(0, n / nt, n))
            elif self.strategy == "interpolate":
                axes.append(linspace(0, 1, n))
            else:
                axes.append(torch.arange(n, dtype=torch.float32) / max(nt - 1, 1))
        return grid_points(*axes)  # (N, 2)

    def skew_generators(self, block: int | None) -> torch.Tensor:
        """(L, H, axes, m, b, b) float32 skew-symmetric generators, L = 1 or depth."""
        return packed_skew(self._block_slice(self.generators, block).float(), self.skew_index)

    def build_rotation(self, grid, block, device):
        gen = self.skew_generators(block)  # (L, H, 2, m, b, b)
        coords = self.coordinates(grid).to(device)
        pos = torch.cat([coords.new_zeros(self.num_prefix_tokens, 2), coords])  # (P + N, 2): class tokens at 0
        # p_0 A_0 + p_1 A_1 as a pointwise sum, not an einsum: under inductor the einsum's permuted bmm output
        # reached matrix_exp's fallback kernel non-contiguous (an explicit .contiguous() was dropped), which fails
        log_rot = sum(pos[:, a, None, None, None] * gen[:, :, None, a] for a in range(2))  # (L, H, P + N, m, b, b)
        return self._finish(torch.linalg.matrix_exp(log_rot), block)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, block_size={self.block_size}"
