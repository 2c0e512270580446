"""Fixed sinusoidal tables (Vaswani et al. 2017; 2D form of MoCo v3 / timm)."""

from __future__ import annotations

import math

import torch

from .base import EncodingContext, Grid, GridCache, PositionalEncoding, check_choice, check_positive, register
from .functional import ALIGN_MODES, axis_positions, sincos_1d, sincos_2d


class _FixedTable(PositionalEncoding):
    """A deterministic table added to the tokens, cached per grid and device.

    Strategies: ``extrapolate`` (default) computes the formula at the new
    integer positions; ``interpolate`` scales positions into the trained range.
    ``align`` (image axes): how ``interpolate`` maps positions, see
    :func:`functional.axis_positions`. The table is derived state, never stored in a
    checkpoint.
    """

    strategies = ("extrapolate", "interpolate")

    def __init__(
        self, ctx: EncodingContext, strategy: str | None = None, temperature: float = 10000.0, align: str = "corners"
    ):
        super().__init__(ctx, strategy)
        self.temperature = check_positive(
            "temperature", temperature, f"e.g. the default, {self.option_default('temperature')}"
        )
        self.align = check_choice(self.name, "align", align, ALIGN_MODES)
        self._tables = GridCache()

    def build(self, grid: Grid) -> torch.Tensor:
        raise NotImplementedError

    def table_for(self, grid: Grid, device: torch.device) -> torch.Tensor:
        return self._tables.get(lambda: self.build(tuple(grid)).to(device), grid, device, self.strategy)

    def add_to_tokens(self, x: torch.Tensor, grid: Grid) -> torch.Tensor:
        return x + self.table_for(grid, x.device).to(x.dtype)


@register
class SinCos1D(_FixedTable):
    """The original Transformer's table over the token index (the flattened
    patch index on images: the ablation that ignores 2D structure)."""

    name = "sincos_1d"

    def build(self, grid: Grid) -> torch.Tensor:
        n, n_train = math.prod(grid), math.prod(self.train_grid)
        pos = axis_positions(n, n_train, self.strategy == "interpolate", len(grid) == 2, self.align)
        return sincos_1d(pos, self.ctx.dim, self.temperature)


@register
class SinCos2D(_FixedTable):
    """Fixed 2D sin-cos table: half the channels encode the row, half the column,
    frequencies T^(-i/(D/4)) (Chen, Xie & He 2021, MoCo v3)."""

    name = "sincos_2d"
    grid_dims = (2,)

    def build(self, grid: Grid) -> torch.Tensor:
        interp = self.strategy == "interpolate"
        rows = axis_positions(grid[0], self.train_grid[0], interp, True, self.align)
        cols = axis_positions(grid[1], self.train_grid[1], interp, True, self.align)
        return sincos_2d(rows, cols, self.ctx.dim, self.temperature)
