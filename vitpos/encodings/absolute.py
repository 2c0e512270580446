"""Absolute encodings added to the tokens: none, learned 1D table, learned row/column tables
(concatenated, ``learned_2d``, or summed, ``learned_2d_sum``)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .base import EncodingContext, Grid, PositionalEncoding, check_choice, register
from .functional import resample_axis_bicubic, resample_axis_linear, resample_table_1d, resample_table_2d
from .symbolic_sizes import shrinks

ANTIALIAS_MODES = ("shrink", "always")
RESAMPLE_MODES = ("linear", "bicubic")


@register
class NoEncoding(PositionalEncoding):
    """No position information at all: the ablation (NoPE).

    A ViT with global average pooling and this encoding is invariant to
    permuting its patch tokens.
    """

    name = "none"
    strategies = ("none",)


class _ResizableTable(PositionalEncoding):
    """Shared logic of learned tables: resize for an unseen grid, or refuse.

    ``interpolate`` (default) resamples the trained table to the new grid
    (bicubic in 2D, as ViT fine-tuning at higher resolution, Dosovitskiy et
    al. 2021; linear in 1D). ``error`` refuses any grid the table was not
    trained on. On sequences, a shorter length uses the first n positions,
    which are exactly the trained ones.

    ``antialias`` (images): ``shrink`` (default) antialiases only when the grid
    shrinks, so an enlarged table is plain bicubic; ``always`` antialiases up
    and down, as timm's ``resample_abs_pos_embed`` (whose antialiased kernel
    is a slightly different cubic even when enlarging).

    Multi-resolution training (ResFormer, FlexiViT): in training mode a grid
    other than the training grid always resamples the table, whatever the
    strategy says (``error`` refuses only in evaluation), bicubically in 2D as
    timm's ``resample_abs_pos_embed``. The resize runs in the forward pass on
    the parameter itself, never on a cached copy, so the gradient of every
    grid reaches the one trained table.
    """

    strategies = ("interpolate", "error")

    def __init__(self, ctx: EncodingContext, strategy: str | None = None, antialias: str = "shrink"):
        super().__init__(ctx, strategy)
        self.antialias = check_choice(self.name, "antialias", antialias, ANTIALIAS_MODES)

    def _antialias(self, grid: Grid) -> bool | torch.Tensor:
        """Whether resizing the trained table to ``grid`` antialiases (both axes alike); a 0-d bool
        tensor for a symbolic grid (:func:`~vitpos.encodings.symbolic_sizes.shrinks`)."""
        return True if self.antialias == "always" else shrinks(grid, self.train_grid)

    def _check_grid(self, grid: Grid) -> None:
        """Refuse ``grid`` under ``error``, in evaluation only (training at any grid resamples)."""
        if self.strategy == "error" and not self.training:
            raise ValueError(
                f"encoding '{self.name}' was trained on the grid {self.train_grid} and got {grid}; "
                "set encoding.strategy=interpolate to resample its table"
            )


@register
class Learned1D(_ResizableTable):
    """One learned vector per token position (ViT, Dosovitskiy et al. 2021), N(0, 0.02) init.

    On images the table is indexed by the flattened patch position and resized
    as a 2D grid.
    """

    name = "learned_1d"

    def __init__(
        self, ctx: EncodingContext, strategy: str | None = None, init_std: float = 0.02, antialias: str = "shrink"
    ):
        super().__init__(ctx, strategy, antialias)
        self.table = nn.Parameter(torch.randn(math.prod(ctx.grid), ctx.dim) * init_std)  # (N, D)

    def table_for(self, grid: Grid) -> torch.Tensor:
        if self.is_train_grid(grid):
            return self.table
        if len(grid) == 1:
            if grid[0] <= self.train_grid[0]:
                return self.table[: grid[0]]  # the first n positions are the trained ones
            self._check_grid(grid)
            return resample_table_1d(self.table, grid[0])
        self._check_grid(grid)
        return resample_table_2d(self.table, self.train_grid, grid, antialias=self._antialias(grid))

    def add_to_tokens(self, x: torch.Tensor, grid: Grid) -> torch.Tensor:
        return x + self.table_for(grid).to(x.dtype)


@register
class Learned2D(_ResizableTable):
    """Separate learned row (h x D/2) and column (w x D/2) tables, concatenated
    per token, N(0, 0.02) init: the factorized 2D embedding of the ViT paper's
    ablation (Dosovitskiy et al. 2021, appendix D.4)."""

    name = "learned_2d"
    grid_dims = (2,)

    def __init__(
        self, ctx: EncodingContext, strategy: str | None = None, init_std: float = 0.02, antialias: str = "shrink"
    ):
        super().__init__(ctx, strategy, antialias)
        if ctx.dim % 2:
            raise ValueError(f"learned_2d needs an even model.dim, got {ctx.dim}")
        h, w = ctx.grid
        self.rows = nn.Parameter(torch.randn(h, ctx.dim // 2) * init_std)  # (h, D/2)
        self.cols = nn.Parameter(torch.randn(w, ctx.dim // 2) * init_std)  # (w, D/2)

    def table_for(self, grid: Grid) -> torch.Tensor:
        """(h*w, D). Resizing the row and column tables on their own equals
        resizing the full table bicubically (it is constant along the other axis)."""
        h, w = grid
        rows, cols = self.rows, self.cols
        if not self.is_train_grid(grid):
            self._check_grid(grid)
            antialias = self._antialias(grid)
            rows = resample_axis_bicubic(rows, h, antialias)  # (h, D/2)
            cols = resample_axis_bicubic(cols, w, antialias)  # (w, D/2)
        half = rows.shape[1]
        table = torch.cat([rows[:, None].expand(h, w, half), cols[None].expand(h, w, half)], -1)
        return table.reshape(h * w, 2 * half)  # (h*w, D)

    def add_to_tokens(self, x: torch.Tensor, grid: Grid) -> torch.Tensor:
        return x + self.table_for(grid).to(x.dtype)


@register
class Learned2DSum(_ResizableTable):
    """Factorized learned table of full width: a row table (h x D) and a column
    table (w x D), summed per token (NaViT, Dehghani et al. 2023, sec. 3.1,
    "factorized & fractional positional embeddings"), N(0, 0.02) init.

    ``learned_2d`` concatenates two half-width tables, so each channel knows
    one axis; here every channel mixes both, with h + w vectors of width D.

    Conventions from timm's ``NaFlexEmbeds`` with ``pos_embed='factorized'``
    (timm 1.0.31, ``timm/models/naflexvit.py``, ``_apply_factorized_pos_embed``):
    row-major tokens, ``pos = rows[:, None] + cols[None, :]``, and on another
    grid each table is resized on its own axis, linearly with
    ``align_corners=False`` (``resample=linear``, the default). ``resample=bicubic``
    resizes as ``learned_2d`` does (bicubic, ``antialias`` as there).
    Difference from timm: no ``pos_embed_ar_preserving`` (resize both axes to
    the longer side, then crop); each axis is resized to its own length.
    """

    name = "learned_2d_sum"
    grid_dims = (2,)

    def __init__(
        self,
        ctx: EncodingContext,
        strategy: str | None = None,
        init_std: float = 0.02,
        antialias: str = "shrink",
        resample: str = "linear",
    ):
        super().__init__(ctx, strategy, antialias)
        self.resample = check_choice(self.name, "resample", resample, RESAMPLE_MODES)
        h, w = ctx.grid
        self.rows = nn.Parameter(torch.randn(h, ctx.dim) * init_std)  # (h, D)
        self.cols = nn.Parameter(torch.randn(w, ctx.dim) * init_std)  # (w, D)

    def table_for(self, grid: Grid) -> torch.Tensor:
        """(h*w, D): rows[y] + cols[x], each table resized on its own axis first."""
        h, w = grid
        rows, cols = self.rows, self.cols
        if not self.is_train_grid(grid):
            self._check_grid(grid)
            if self.resample == "linear":
                rows, cols = resample_axis_linear(rows, h), resample_axis_linear(cols, w)
            else:
                antialias = self._antialias(grid)
                rows = resample_axis_bicubic(rows, h, antialias)  # (h, D)
                cols = resample_axis_bicubic(cols, w, antialias)  # (w, D)
        return (rows[:, None, :] + cols[None, :, :]).reshape(h * w, -1)  # (h*w, D)

    def add_to_tokens(self, x: torch.Tensor, grid: Grid) -> torch.Tensor:
        return x + self.table_for(grid).to(x.dtype)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, resample={self.resample}"
