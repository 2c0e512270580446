"""Swin-style 2D relative position bias (Liu et al. 2021), per block or shared."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .base import EncodingContext, Grid, GridCache, PositionalEncoding, register
from .functional import relative_position_index_2d


@register
class RelativeBias2D(PositionalEncoding):
    """A learned bias per head for every (dy, dx) offset between two patches,
    added to the attention logits: (2h-1)(2w-1) entries per head, per block by
    default (``shared=True``: one table for all blocks). With a class token,
    three extra entries per head (cls->patch, patch->cls, cls->cls) as in BEiT.

    Unseen grids: ``interpolate`` (default) resizes the offset table bicubically
    to (2h'-1)(2w'-1), the Swin v1 fine-tuning practice; ``clamp`` reuses the
    trained entries, offsets beyond the trained range clamped to its edge.
    """

    name = "rel_bias_2d"
    grid_dims = (2,)
    strategies = ("interpolate", "clamp")

    def __init__(self, ctx: EncodingContext, strategy: str | None = None, shared: bool = False, init_std: float = 0.02):
        super().__init__(ctx, strategy)
        if ctx.num_prefix_tokens > 1:
            raise ValueError("rel_bias_2d supports at most one prefix (class) token")
        h, w = ctx.grid
        self.num_offsets = (2 * h - 1) * (2 * w - 1)
        entries = self.num_offsets + (3 if ctx.num_prefix_tokens else 0)
        self.shared = shared
        tables = 1 if shared else ctx.depth
        self.tables = nn.Parameter(torch.randn(tables, entries, ctx.num_heads) * init_std)  # (T, E, H)
        self._tables = GridCache()

    def index_for(self, grid: Grid, device: torch.device) -> torch.Tensor:
        """(N, N) long index, built once per grid/strategy/device."""

        def build() -> torch.Tensor:
            if self.strategy == "interpolate" or self.is_train_grid(grid):
                return relative_position_index_2d(*grid).to(device)
            return relative_position_index_2d(*grid, table_grid=self.train_grid).to(device)  # offsets clamped

        return self._tables.get(build, grid, device, self.strategy)

    def offset_table(self, block: int, grid: Grid) -> torch.Tensor:
        """(E', H): the offset entries for ``grid`` (resized if needed), then the class entries."""
        table = self.tables[0 if self.shared else block]
        offsets, extra = table[: self.num_offsets], table[self.num_offsets :]
        if self.strategy == "interpolate" and not self.is_train_grid(grid):
            (h, w), (ht, wt) = grid, self.train_grid
            x = offsets.t().reshape(1, -1, 2 * ht - 1, 2 * wt - 1)  # (1, H, 2h-1, 2w-1)
            x = F.interpolate(x, size=(2 * h - 1, 2 * w - 1), mode="bicubic", align_corners=False)
            offsets = x.reshape(x.shape[1], -1).t()  # (E', H)
        return torch.cat([offsets, extra], 0)

    def attention_bias(self, grid, block, device, dtype):
        table = self.offset_table(block, grid)
        index = self.index_for(grid, device)
        n = index.shape[0]
        bias = table[index.flatten()].reshape(n, n, -1).permute(2, 0, 1)  # (H, N, N)
        if self.num_prefix_tokens:
            e = table.shape[0] - 3  # class entries: cls->patch, patch->cls, cls->cls
            heads = bias.shape[0]
            full = bias.new_empty(heads, n + 1, n + 1)
            full[:, 1:, 1:] = bias
            full[:, 0, 1:] = table[e][:, None]
            full[:, 1:, 0] = table[e + 1][:, None]
            full[:, 0, 0] = table[e + 2]
            bias = full
        return bias.to(dtype)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, shared={self.shared}"
