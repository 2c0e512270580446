"""Rotary position embeddings: 1D, axial 2D, learned-frequency and RoPE-Mixed.

q and k are rotated pair by pair by angle = position * frequency, so the logit
q_m . k_n depends on positions only through m - n (Su et al. 2021, RoFormer).
Prefix (class) tokens are never rotated. Angles are computed in float32, also
under autocast, and fixed rotation tables are cached per grid/strategy/device.

Strategies for grids beyond the training grid (interpolation, NTK, dynamic,
YaRN): :mod:`vitpos.encodings.rope_scaling`.

Partial rotation (every encoding here), at no extra cost: an unrotated pair is
a pair whose angle is 0, i.e. 1 + 0j in the same table (times the YaRN factor).

- ``rotate_fraction`` p in (0, 1]: p-RoPE (Barbero et al. 2024, "Round and
  Round We Go!", sec. 6): of the n pairs (per axis in 2D) the floor(p * n) with the
  highest |omega| turn, whatever order they are stored in (:meth:`_RotaryBase.keep_fastest`),
  with their values (base^(-2i/Dh) in 1D), not re-spread; the others stay still.
  As the authors' code, google-deepmind/gemma ``gemma/gm/math/
  _positional_embeddings.py`` ``apply_rope(rope_proportion=)`` (commit faba7e31):
  int(p * Dh // 2) pairs keep their timescale, the rest get an infinite one.
  (x-transformers' ``rotary_emb_dim``, lucidrains/x-transformers
  ``x_transformers/x_transformers.py``, commit 003275c6, instead rotates the
  first channels with a spectrum recomputed over them, GPT-J style.) On learned
  frequencies the pairs left out are the lowest at initialization.
- ``rotate_heads`` k: only heads 0..k-1 turn; the others see no position.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import nn

from . import functional as fn
from .base import (
    EncodingContext,
    Grid,
    GridCache,
    OptionError,
    PositionalEncoding,
    check_head_dim,
    check_positive,
    register,
)
from .functional import axis_positions
from .rope_scaling import ROPE_STRATEGIES, RopeScaling


class _RotaryBase(RopeScaling, PositionalEncoding):
    strategies = ROPE_STRATEGIES
    strategy_aliases = {"linear": "interpolate"}  # HF's rope_type "linear" is position interpolation
    rot_axes = 1  # how many grid axes the frequencies are split over

    def __init__(
        self,
        ctx: EncodingContext,
        strategy: str | None = None,
        base: float = 10000.0,
        scale: float | None = None,
        beta_fast: float = 32.0,
        beta_slow: float = 1.0,
        layout: str = "interleaved",
        yarn_ramp: str = "index",
        align: str = "corners",
        rotate_fraction: float = 1.0,
        rotate_heads: int | None = None,
    ):
        super().__init__(ctx, strategy)
        check_head_dim(self.name, ctx, 2 * self.rot_axes)
        if layout not in ("interleaved", "half"):
            raise OptionError(
                "layout", f"unknown RoPE layout '{layout}'; valid: interleaved, half (encoding.layout=...)"
            )
        check_positive("base", base, f"e.g. the default of {self.name}, {self.option_default('base')}")
        self.base, self.layout = base, layout
        self.init_scaling(scale, beta_fast, beta_slow, yarn_ramp, align)
        self.rotate_fraction, self.rotate_heads = rotate_fraction, rotate_heads
        self.check_partial(ctx, rotate_fraction, rotate_heads)
        # (H or 1, 1, Dh/2) bool: which pairs of which heads turn; None: all (the plain path)
        self.register_buffer("turning", None, persistent=False)
        axis = ctx.head_dim // (2 * self.rot_axes)
        self.keep_fastest(fn.rope_inv_freq(axis, base).repeat(self.rot_axes))  # RoPE's spectrum, per axis
        self._tables = GridCache()

    def pair_groups(self) -> int:
        """How many equal, contiguous groups of pairs ``rotate_fraction`` counts in (each keeps its own
        fastest pairs): the axes of an axial spectrum, ``rot_axes``; 1 where the pairs are no axes."""
        return self.rot_axes

    def check_partial(self, ctx: EncodingContext, fraction, heads) -> None:
        """An :class:`OptionError` for a ``rotate_fraction`` or ``rotate_heads`` no model can use."""
        n = ctx.head_dim // (2 * self.pair_groups())  # pairs per group
        per = " per axis" if self.pair_groups() > 1 else ""
        if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) or not 0 < fraction <= 1:
            raise OptionError(
                "rotate_fraction",
                f"encoding.rotate_fraction must be a number in (0, 1], got {fraction!r} "
                "(1: every pair turns, plain RoPE; 0.75: p-RoPE without the lowest quarter of the frequencies)",
            )
        kept = math.floor(fraction * n)  # as the authors' int(p * Dh // 2)
        if kept == 0:
            raise OptionError(
                "rotate_fraction",
                f"encoding.rotate_fraction={fraction} turns floor({fraction} * {n}) = 0 of the {n} pairs{per}; "
                f"set it to at least {1 / n:.3g}, or use encoding=none",
            )
        if heads is not None and (
            isinstance(heads, bool) or not isinstance(heads, int) or not 1 <= heads <= ctx.num_heads
        ):
            raise OptionError(
                "rotate_heads",
                "encoding.rotate_heads must be null (every head) or an integer in "
                f"[1, model.num_heads={ctx.num_heads}], got {heads!r}",
            )

    def keep_fastest(self, speeds: torch.Tensor, kept: int | None = None) -> None:
        """Set ``turning`` from ``speeds`` (Dh/2,), each pair's |omega| (at initialization for learned
        frequencies): in each of the :meth:`pair_groups` groups of n pairs, the ``kept`` (default
        floor(rotate_fraction * n), as the authors' int(p * Dh // 2)) fastest turn and the others stay
        still, picked by |omega| and not by position (a tie: the earlier pair turns). An encoding whose
        spectrum is not RoPE's calls it again with its own; None when every pair of every head turns."""
        groups, heads, num_heads = self.pair_groups(), self.rotate_heads, self.ctx.num_heads
        n = speeds.numel() // groups
        kept = math.floor(self.rotate_fraction * n) if kept is None else kept
        if kept == n and heads in (None, num_heads):
            self.turning = None
            return
        order = torch.sort(speeds.reshape(groups, n).abs(), dim=-1, descending=True, stable=True).indices  # (G, n)
        pairs = torch.zeros(groups, n, dtype=torch.bool).scatter_(1, order[:, :kept], True).reshape(-1)  # (Dh/2,)
        rows = torch.arange(num_heads if heads is not None else 1) < (heads or 1)  # (H,) or (1,)
        self.turning = pairs[None, None, :] & rows[:, None, None]  # (H or 1, 1, Dh/2)

    def partial(self, angles: torch.Tensor) -> torch.Tensor:
        """``angles`` (..., N, Dh/2) with the pairs that do not turn set to 0 (a rotation by 1 + 0j)."""
        if self.turning is None:
            return angles
        return torch.where(self.turning.to(angles.device), angles, 0.0)  # (H or 1, N, Dh/2)

    # ----------------------------------------------------------------- hook
    def rotation(self, grid: Grid, block: int, device: torch.device) -> torch.Tensor:
        """Complex rotations (N, Dh/2), or (H, N, Dh/2) for per-head frequencies; a fixed
        spectrum's are cached per grid, strategy and device."""
        grid = tuple(grid)
        return self._tables.get(
            lambda: self.build_rotation(grid, block, device), grid, device, self.strategy, self.scale, self.yarn_ramp
        )

    def build_rotation(self, grid: Grid, block: int, device: torch.device) -> torch.Tensor:
        """The rotations of block ``block`` on ``grid``, on ``device``, built afresh."""
        raise NotImplementedError

    def rotate_qk(self, q, k, grid, block):
        rot = self.rotation(grid, block, q.device)  # magnitude qk_magnitude(grid) on grid tokens
        p = self.num_prefix_tokens
        m = self.qk_magnitude(grid) if p else 1.0  # prefix tokens are not rotated but share the temperature
        return fn.on_grid_tokens(q, k, p, lambda x: fn.apply_rotary(x, rot, self.layout), prefix_scale=m)

    def extra_repr(self) -> str:
        extra = f"{super().extra_repr()}, base={self.base}, layout={self.layout}"
        if self.turning is not None:
            extra += f", rotate_fraction={self.rotate_fraction}, rotate_heads={self.rotate_heads}"
        return extra


@register
class RoPE1D(_RotaryBase):
    """1D RoPE over the token index (the flattened patch index on images).

    ``layout``: ``interleaved`` pairs (2i, 2i+1) or ``half`` pairs (i, i+Dh/2).
    """

    name = "rope_1d"

    def build_rotation(self, grid, block, device):
        n, n_train = math.prod(grid), math.prod(self.train_grid)
        inv_freq = fn.rope_inv_freq(self.ctx.head_dim // 2, self.base)
        angles = self.axis_angles(n, n_train, inv_freq, image=len(grid) == 2)
        rot = fn.rope_angles_to_complex(self.partial(angles), self.qk_magnitude(grid))  # (N, Dh/2) or (H, N, Dh/2)
        return rot.to(device)


@register
class RoPE2D(_RotaryBase):
    """Axial 2D RoPE (Heo et al. 2024, RoPE-ViT): the first half of the rotary
    pairs turn with the column index, the second half with the row index, each
    with frequencies base^(-4i/Dh); base 100 by default, as RoPE-ViT."""

    name = "rope_2d"
    grid_dims = (2,)
    rot_axes = 2

    def __init__(self, ctx: EncodingContext, strategy: str | None = None, base: float = 100.0, **kw):
        super().__init__(ctx, strategy, base=base, **kw)

    def build_rotation(self, grid, block, device):
        (h, w), (ht, wt) = grid, self.train_grid
        inv_freq = fn.rope_inv_freq(self.ctx.head_dim // 4, self.base)  # (Dh/4,): base^(-4i/Dh)
        ang_x = self.axis_angles(w, wt, inv_freq, image=True)  # (w, Dh/4)
        ang_y = self.axis_angles(h, ht, inv_freq, image=True)  # (h, Dh/4)
        angles = torch.cat([ang_x[None, :, :].expand(h, w, -1), ang_y[:, None, :].expand(h, w, -1)], dim=-1)
        angles = angles.reshape(h * w, -1)  # (h*w, Dh/2)
        return fn.rope_angles_to_complex(self.partial(angles), self.qk_magnitude(grid)).to(device)


class _LearnedFrequencies(_RotaryBase):
    """Rotary encodings whose frequencies are parameters: only ``extrapolate``
    and ``interpolate`` are defined (NTK and YaRN assume the fixed spectrum)."""

    strategies = ("extrapolate", "interpolate")

    def rotation(self, grid, block, device):  # parameters train: built afresh at every call, never cached
        return self.build_rotation(tuple(grid), block, device)

    def positions(self, grid: Grid, device: torch.device) -> list[torch.Tensor]:
        """[x (N,)] of the token index for 1D RoPE, or [x (N,), y (N,)] on the 2D grid."""
        interp = self.strategy == "interpolate"
        if len(grid) == 1 or self.rot_axes == 1:
            n, nt = math.prod(grid), math.prod(self.train_grid)
            return [axis_positions(n, nt, interp, len(grid) == 2, self.align).to(device)]
        ys, xs = fn.grid_positions(grid, self.train_grid, interp, self.align).t().contiguous().to(device)
        return [xs, ys]  # (N,), (N,)


@register
class RoPE1DLearned(_LearnedFrequencies):
    """1D RoPE with learnable frequencies per block and head, initialized from
    the standard spectrum base^(-2i/Dh) (as RoPE-Mixed does in 2D)."""

    name = "rope_1d_learned"

    def __init__(self, ctx: EncodingContext, strategy: str | None = None, base: float = 10000.0, **kw):
        super().__init__(ctx, strategy, base=base, **kw)
        inv = fn.rope_inv_freq(ctx.head_dim // 2, base)
        self.freqs = nn.Parameter(inv.repeat(ctx.depth, ctx.num_heads, 1))  # (depth, H, Dh/2)

    def build_rotation(self, grid, block, device):
        (pos,) = self.positions(grid, device)
        angles = pos[None, :, None] * self.freqs[block].float()[:, None, :]  # (H, N, Dh/2)
        return fn.rope_angles_to_complex(self.partial(angles))


@register
class RoPE2DMixed(_LearnedFrequencies):
    """RoPE-Mixed (Heo et al., ECCV 2024): per block and head, learnable 2D
    frequency vectors (fx, fy) with angle = fx * x + fy * y, so pairs can turn
    along diagonal directions. Initialized with a random direction per head,
    the second half of the pairs at +90 degrees, magnitudes base^(-4i/Dh) with
    base 10. Excluded from weight decay."""

    name = "rope_2d_mixed"
    grid_dims = (2,)
    rot_axes = 2

    def __init__(self, ctx: EncodingContext, strategy: str | None = None, base: float = 10.0, **kw):
        super().__init__(ctx, strategy, base=base, **kw)
        mag = fn.rope_inv_freq(ctx.head_dim // 4, base)  # (Dh/4,): base^(-4i/Dh)
        theta = torch.rand(ctx.depth, ctx.num_heads, 1) * 2 * math.pi  # (depth, H, 1)
        fx = torch.cat([mag * torch.cos(theta), mag * torch.cos(theta + math.pi / 2)], -1)
        fy = torch.cat([mag * torch.sin(theta), mag * torch.sin(theta + math.pi / 2)], -1)
        self.freqs = nn.Parameter(torch.stack([fx, fy], -1))  # (depth, H, Dh/2, 2)

    def build_rotation(self, grid, block, device):
        xs, ys = self.positions(grid, device)
        f = self.freqs[block].float()  # (H, Dh/2, 2)
        angles = xs[None, :, None] * f[:, None, :, 0] + ys[None, :, None] * f[:, None, :, 1]  # (H, N, Dh/2)
        return fn.rope_angles_to_complex(self.partial(angles))  # (H, N, Dh/2)
