"""Conditional position encoding: the PEG of CPVT (Chu et al. 2023)."""

from __future__ import annotations

import torch
from torch import nn

from .base import EncodingContext, OptionError, PositionalEncoding, register


@register
class ConditionalPE(PositionalEncoding):
    """A 3x3 depthwise convolution over the patch grid, zero padded, added back
    as a residual after the chosen blocks (``blocks``, default [0]: after the
    first block, as CPVT). Position comes from the zero padding at the borders
    and spreads inward through the layers; any grid works without a strategy.
    The class token passes around the convolution.
    """

    name = "cpe"
    grid_dims = (2,)
    strategies = ("none",)

    def __init__(self, ctx: EncodingContext, strategy: str | None = None, blocks=(0,), kernel_size: int = 3):
        super().__init__(ctx, strategy)
        blocks = [int(b) for b in blocks]
        bad = [b for b in blocks if not 0 <= b < ctx.depth]
        if bad:
            raise OptionError(
                "blocks",
                f"cpe blocks {bad} out of range for a model of depth {ctx.depth} (encoding.blocks=...)",
            )
        if isinstance(kernel_size, bool) or not isinstance(kernel_size, int) or kernel_size < 1 or kernel_size % 2 == 0:
            raise OptionError(
                "kernel_size",
                f"encoding.kernel_size must be an odd integer >= 1 (the grid keeps its size), got {kernel_size!r} "
                "(e.g. the default, 3)",
            )
        self.blocks = blocks
        self.convs = nn.ModuleDict(
            {str(b): nn.Conv2d(ctx.dim, ctx.dim, kernel_size, padding=kernel_size // 2, groups=ctx.dim) for b in blocks}
        )

    def after_block(self, x: torch.Tensor, grid, block: int) -> torch.Tensor:
        if str(block) not in self.convs:
            return x
        p = self.num_prefix_tokens
        prefix, tokens = x[:, :p], x[:, p:]
        b, n, d = tokens.shape
        feat = tokens.transpose(1, 2).reshape(b, d, *grid)  # (B, D, h, w)
        tokens = tokens + self.convs[str(block)](feat).flatten(2).transpose(1, 2)  # (B, N, D)
        return torch.cat([prefix, tokens], dim=1)

    def no_weight_decay(self) -> set[str]:
        return set()  # convolution weights decay like any layer; biases are excluded by ndim
