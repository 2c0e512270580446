"""FIRE (Li et al., ICLR 2024, arXiv 2310.04418): functional interpolation for relative positions, in 2D.

A small MLP per block maps the normalised offset between two tokens to one logit bias per head. The 1D
causal original: bias(i, j) = f(psi(i - j) / psi(max(L, i))), psi(x) = log(c x + 1), f: 1 -> 32 -> H
(ReLU), c and the threshold L learned. Here (``fire_2d``), on a row-major h x w grid with the offset
(dy, dx) = p_query - p_key in patches, one input per axis::

    u_a  = sign(d_a) psi(|d_a|) / (psi(max(L, E_a)) + eps),   a in (y, x)
    bias = f(u_y, u_x)                                        f: 2 -> 32 -> H (ReLU)

E_a = n_a - 1 is the grid's extent (the 2D stand-in for the query position i): the bias depends on the
offset only and keeps its sign per axis. Strategies: ``extrapolate`` (default: E_a of the training grid;
longer offsets give |u| > 1) and ``interpolate`` (E_a of the current grid: FIRE's progressive
interpolation; the threshold keeps a smaller grid from being stretched). L starts at max(h, w) - 1.

Conventions (the reference's ``FIRE``): Linear(in, 32) -> ReLU -> Linear(32, H) with PyTorch's default
init, stored as stacked (block, in, out) ``w1, b1, w2, b2``; c one scalar at 0.1, used as |c x|;
L = |multiplier * L0| with the multiplier at 1; eps = 1e-6; offsets query - key. Deliberate differences:
2D and bidirectional (the grid extent as normaliser, not the query position; signed offsets, where the
reference takes |i - j|); L0 the training extent, not 512; no randomised positions. Per block (default)
an MLP, c and L of its own, ``shared=true`` one for all. The MLP runs over the (2h-1)(2w-1) distinct
offsets in float32 (autocast off); a cached Swin index gathers the (H, N, N) bias, cast to the compute
dtype; class tokens get zero rows and columns.

Provenance and checks: docs/encodings.md#fire
"""

from __future__ import annotations

import torch
from torch import nn

from .base import EncodingContext, Grid, GridCache, OptionError, PositionalEncoding, check_positive, register
from .functional import grid_points, pad_prefix, relative_position_index_2d

EPS = 1e-6  # the reference's eps on the normaliser


def offset_table_2d(h: int, w: int) -> torch.Tensor:
    """(2h-1)(2w-1), 2) float32 offsets (dy, dx), query - key, in the order of
    :func:`functional.relative_position_index_2d` (dy major, both from the most negative)."""
    dy = torch.arange(-(h - 1), h, dtype=torch.float32)
    dx = torch.arange(-(w - 1), w, dtype=torch.float32)
    return grid_points(dy, dx)  # (E, 2)


def fire_psi(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """FIRE's log transform psi(x) = log(|c x| + 1)."""
    return torch.log(torch.abs(c * x) + 1)


def fire_inputs(offsets: torch.Tensor, c: torch.Tensor, threshold: torch.Tensor, extents) -> torch.Tensor:
    """(..., A) MLP inputs sign(d) psi(|d|) / (psi(max(L, E_a)) + eps) for offsets (..., A), one extent per axis.

    ``threshold`` L (scalar tensor); at L == E_a the threshold is taken (its gradient goes to L)."""
    # (A,): zero plus each extent keeps a symbolic extent (torch.export) symbolic, where float() would fix it
    extent = torch.stack([offsets.new_zeros(()) + e for e in extents])
    normaliser = torch.where(threshold >= extent, threshold, extent)  # (A,): max(L, E_a)
    return torch.sign(offsets) * fire_psi(offsets.abs(), c) / (fire_psi(normaliser, c) + EPS)


def _uniform(shape: tuple[int, ...], fan_in: int) -> torch.Tensor:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)): nn.Linear's default weight and bias initialisation."""
    bound = fan_in**-0.5
    return torch.empty(shape).uniform_(-bound, bound)


@register
class FIRE2D(PositionalEncoding):
    """FIRE on the patch grid: bias = MLP(u_y, u_x) per head, u the log-normalised
    signed offsets per axis (see the module docstring). Learned, per block.

    Options: ``mlp_width`` (32), ``init_c`` (0.1), ``init_threshold`` (null: the
    training grid's longer extent max(h, w) - 1), ``shared`` (false: one MLP per block).
    """

    name = "fire_2d"
    grid_dims = (2,)
    strategies = ("extrapolate", "interpolate")

    def __init__(
        self,
        ctx: EncodingContext,
        strategy: str | None = None,
        mlp_width: int = 32,
        init_c: float = 0.1,
        init_threshold: float | None = None,
        shared: bool = False,
    ):
        super().__init__(ctx, strategy)
        if isinstance(mlp_width, bool) or not isinstance(mlp_width, int) or mlp_width < 1:
            raise OptionError(
                "mlp_width", f"encoding.mlp_width must be an integer >= 1, got {mlp_width!r} (the paper's 32)"
            )
        check_positive("init_c", init_c, "the paper's 0.1")
        check_positive("init_threshold", init_threshold, "null: the training grid's longer extent", allow_none=True)
        if not isinstance(shared, bool):
            raise OptionError("shared", f"encoding.shared must be true or false, got {shared!r}")
        h, w = self.train_grid
        self.mlp_width, self.shared = mlp_width, shared
        #: L0: the threshold's fixed initial value; the threshold is |threshold_scale * L0|
        self.threshold_init = float(init_threshold if init_threshold is not None else max(h - 1, w - 1, 1))
        tables = 1 if shared else ctx.depth
        # the MLPs of all blocks stacked, (in, out) layout; nn.Linear's default init: U(+-1/sqrt(fan_in))
        self.w1 = nn.Parameter(_uniform((tables, 2, mlp_width), fan_in=2))  # (T, 2, W)
        self.b1 = nn.Parameter(_uniform((tables, mlp_width), fan_in=2))  # (T, W)
        self.w2 = nn.Parameter(_uniform((tables, mlp_width, ctx.num_heads), fan_in=mlp_width))  # (T, W, H)
        self.b2 = nn.Parameter(_uniform((tables, ctx.num_heads), fan_in=mlp_width))  # (T, H)
        self.c = nn.Parameter(torch.full((tables,), float(init_c)))  # (T,)
        self.threshold_scale = nn.Parameter(torch.ones(tables))  # (T,), the reference's L_multiplier
        self._tables = GridCache()

    def offsets_and_index(self, grid: Grid, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """The distinct offsets ((2h-1)(2w-1), 2) and the (N, N) index of each token pair into them."""
        h, w = grid

        def build() -> tuple[torch.Tensor, torch.Tensor]:
            return offset_table_2d(h, w).to(device), relative_position_index_2d(h, w).to(device)

        return self._tables.get(build, grid, device)

    def threshold(self, block: int) -> torch.Tensor:
        """L for block ``block`` (a scalar tensor)."""
        return torch.abs(self.threshold_scale[0 if self.shared else block] * self.threshold_init)

    def extents(self, grid: Grid) -> tuple[int, int]:
        """E_a, the farthest offset per axis of the grid that normalises: training or current."""
        h, w = self.train_grid if self.strategy == "extrapolate" else grid
        return h - 1, w - 1

    def offset_bias(self, grid: Grid, block: int, device: torch.device) -> torch.Tensor:
        """((2h-1)(2w-1), H) float32: the bias of every distinct offset, one column per head."""
        k = 0 if self.shared else block
        offsets, _ = self.offsets_and_index(grid, device)
        with torch.autocast(device.type, enabled=False):  # float32 even under bf16 autocast
            u = fire_inputs(offsets, self.c[k].float(), self.threshold(block).float(), self.extents(grid))  # (E, 2)
            hidden = torch.relu(u @ self.w1[k].float() + self.b1[k].float())  # (E, W)
            return hidden @ self.w2[k].float() + self.b2[k].float()  # (E, H)

    def attention_bias(self, grid: Grid, block: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """(H, P + N, P + N) for block ``block``; class tokens: zero rows and columns."""
        _, index = self.offsets_and_index(grid, device)
        bias = self.offset_bias(grid, block, device).t()[:, index]  # (H, E) -> (H, N, N)
        return pad_prefix(bias, self.num_prefix_tokens).to(dtype)

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, mlp_width={self.mlp_width}, shared={self.shared}, "
            f"threshold_init={self.threshold_init:g}"
        )
