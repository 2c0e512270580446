"""STRING (Schenck et al. 2025, "Learning the RoPEs: Better 2D and 3D Position Encodings with STRING").

STRING rotates q and k of the token at 2D position r = (x, y) by R(r) = exp(x L_x + y L_y), with L_x,
L_y skew-symmetric (Dh x Dh) and commuting, so every logit depends on positions only through the
offset; any such R is RoPE in a learned basis, R(r) = P^T RoPE(r) P with P orthogonal (the paper's
theorem). Its two efficient forms:

- ``string_cayley``: q' = RoPE(r) P q, k' = RoPE(r) P k (the leading P^T cancels in q'.k'), P the
  Cayley transform (I - S)(I + S)^-1 of a learned skew-symmetric S per block and head, on this
  project's axial ``rope_2d`` (the same class, options and strategies). S starts at 0: ``rope_2d``.
- ``string_circulant``: L_k = C_k - C_k^T with C_k circulant ((C_k)_ij = c_k[(j - i) mod Dh], c_k
  learned per axis, block and head); they share the DFT eigenbasis, so with theta_k = -2 Im(F c_k)::

      R(r) z = F^-1 ( exp(i (x theta_x + y theta_y)) * F z )     in O(Dh log Dh) per token,

  RoPE in the Fourier basis with learned frequencies (DC and Nyquist never turn: Dh/2 - 1 planes);
  under ``torch.compile`` the same map as F^T RoPE F (see :func:`circulant_rotate`). ``init=rope``
  (default) gives the rotating modes ``rope_2d``'s spectrum (x the first half, y the rest, which
  loses its slowest frequency); ``init=zero`` is R = I. Strategies: ``extrapolate``, ``interpolate``.

No official code is released: both forms follow the paper's equations. P is recomputed at every call (one
batched solve per block), never cached; S is stored as its strict upper triangle; float32 under autocast; no
block-circulant generators. Class tokens are unrotated in the paper's frame (R = I): Cayley turns them by P alone.

Provenance and checks: docs/encodings.md#string
"""

from __future__ import annotations

import math

import torch
from torch import nn

from . import functional as fn
from .base import EncodingContext, Grid, GridCache, PositionalEncoding, check_choice, check_positive, register
from .rope import RoPE2D

CIRCULANT_INITS = ("rope", "zero")


def cayley(skew: torch.Tensor) -> torch.Tensor:
    """P = (I - S)(I + S)^-1 for skew-symmetric S (..., d, d): orthogonal, P = I at S = 0.

    (I - S) and (I + S)^-1 commute, so P = (I + S)^-1 (I - S): one ``solve``, no explicit inverse.
    I + S is never singular (the eigenvalues of S are imaginary)."""
    eye = torch.eye(skew.shape[-1], device=skew.device, dtype=skew.dtype)
    return torch.linalg.solve(eye + skew, eye - skew)


def circulant_frequencies(first_row: torch.Tensor) -> torch.Tensor:
    """theta (..., d//2 + 1) of L = C - C^T for circulant C with first row c (..., d): L's eigenvalue
    on DFT bin j is i theta_j, theta_j = -2 Im(fft(c))_j = 2 sum_m c_m sin(2 pi j m / d)."""
    return -2 * torch.fft.rfft(first_row.float(), dim=-1).imag


def circulant_first_row(theta: torch.Tensor, d: int) -> torch.Tensor:
    """The odd first row c (..., d) whose :func:`circulant_frequencies` are ``theta`` (..., M) on
    bins 1..M, M = (d - 1) // 2, and 0 elsewhere: c_m = (1/d) sum_j theta_j sin(2 pi j m / d)."""
    j = torch.arange(1, theta.shape[-1] + 1, dtype=torch.float64)
    m = torch.arange(d, dtype=torch.float64)
    sines = torch.sin(2 * math.pi * j[:, None] * m[None, :] / d)  # (M, d)
    return (theta.double() @ sines / d).float()


def real_dft_basis(d: int) -> torch.Tensor:
    """F (d, d) float32, orthonormal, for an even d: rows sqrt(2/d) cos(2 pi j m / d), -sqrt(2/d) sin(2 pi j m / d)
    for j = 1 .. d/2 - 1, then the DC and Nyquist rows. F x holds rfft(x)'s bins 1 .. d/2 - 1 (times sqrt(2/d))
    as interleaved (re, im) pairs, then bins 0 and d/2 (times 1/sqrt(d)) as one last pair."""
    m = torch.arange(d, dtype=torch.float64)
    rows = []
    for j in range(1, d // 2):
        rows += [
            math.sqrt(2 / d) * torch.cos(2 * math.pi * j * m / d),
            -math.sqrt(2 / d) * torch.sin(2 * math.pi * j * m / d),
        ]
    rows += [torch.full((d,), 1 / math.sqrt(d), dtype=torch.float64), torch.cos(math.pi * m) / math.sqrt(d)]
    return torch.stack(rows).float()  # (d, d)


def circulant_rotate(x: torch.Tensor, rot: torch.Tensor, basis: torch.Tensor | None = None) -> torch.Tensor:
    """exp(sum r_k L_k) x for x (..., N, d) and rot = exp(i theta(r)) (..., N, d//2 + 1), in float32, cast back.

    Without ``basis``: the real FFT of x times the unit complex numbers, transformed back (the paper's
    O(d log d)). With ``basis`` = :func:`real_dft_basis` (d): the same map as F^T RoPE F, two small matmuls
    around :func:`functional.apply_rotary`, for ``torch.compile``: inductor runs the FFTs as separate
    kernels, so compiled the dense form is the faster one, while in eager mode the FFT is
    (docs/performance.md, "Why the kernels are written as they are")."""
    d = x.shape[-1]
    if basis is None:
        return torch.fft.irfft(torch.fft.rfft(x.float(), dim=-1) * rot, n=d, dim=-1).type_as(x)
    pairs = torch.cat([rot[..., 1 : d // 2], rot[..., :1]], dim=-1)  # (..., N, d/2): (DC, Nyquist) turn by 1
    return (fn.apply_rotary(x.float() @ basis.T, pairs) @ basis).type_as(x)


@register
class StringCayley(RoPE2D):
    """Cayley-STRING: q' = RoPE_2d(r) P q with P = (I - S)(I + S)^-1, S skew-symmetric, learned per
    block and head and initialized to 0 (P = I: exactly ``rope_2d``). Takes every rope_2d option and
    strategy. See the module docstring."""

    name = "string_cayley"

    def __init__(self, ctx: EncodingContext, strategy: str | None = None, **kw):
        super().__init__(ctx, strategy, **kw)
        dh = ctx.head_dim
        self.skew = nn.Parameter(torch.zeros(ctx.depth, ctx.num_heads, dh * (dh - 1) // 2))  # S above the diagonal
        self.register_buffer("skew_index", fn.skew_index(dh), persistent=False)  # row-major strict upper triangle

    def skew_matrix(self, block: int) -> torch.Tensor:
        """S (H, Dh, Dh) float32 of block ``block``: its upper triangle is ``skew`` (row-major), S^T = -S."""
        return fn.packed_skew(self.skew[block].float(), self.skew_index)  # (H, Dh, Dh)

    def basis(self, block: int) -> torch.Tensor:
        """P (H, Dh, Dh) float32 of block ``block``, orthogonal."""
        return cayley(self.skew_matrix(block))

    def rotate_qk(self, q, k, grid, block):
        """q' = RoPE(r) P q on grid tokens and P q on class tokens: the paper's P^T RoPE(r) P q and q
        (unrotated) times P, which leaves every logit q'.k' as the paper's (the shared P cancels)."""
        with torch.autocast(q.device.type, enabled=False):  # float32, also under bf16 autocast
            pt = self.basis(block).transpose(-1, -2)  # (H, Dh, Dh): x @ P^T = (P x)^T per token
            q, k = ((x.float() @ pt).type_as(x) for x in (q, k))  # every token, the class tokens' too
        return super().rotate_qk(q, k, grid, block)  # RoPE(r) on grid tokens; class tokens pass


@register
class StringCirculant(PositionalEncoding):
    """Circulant-STRING: R(r) = exp(x (C_x - C_x^T) + y (C_y - C_y^T)), C circulant with a learned first
    row per axis, block and head, applied with the FFT. ``init``: ``rope`` (rope_2d's spectrum with
    ``base``, default) or ``zero`` (the identity: no position information until trained).
    ``strategy``: extrapolate | interpolate (with ``align``). See the module docstring."""

    name = "string_circulant"
    grid_dims = (2,)
    strategies = ("extrapolate", "interpolate")
    strategy_aliases = {"linear": "interpolate"}

    def __init__(
        self,
        ctx: EncodingContext,
        strategy: str | None = None,
        base: float = 100.0,
        init: str = "rope",
        align: str = "corners",
    ):
        super().__init__(ctx, strategy)
        dh = ctx.head_dim
        if ctx.dim % ctx.num_heads or dh % 2 or dh < 6:
            raise ValueError(
                f"encoding '{self.name}' needs model.dim / model.num_heads = {ctx.dim}/{ctx.num_heads} to be an "
                "even head dim of at least 6 (a rotating Fourier mode per axis); change model.dim or model.num_heads"
            )
        check_positive("base", base, "e.g. the default, 100.0 (rope_2d's)")
        self.base, self.init = float(base), check_choice(self.name, "init", init, CIRCULANT_INITS)
        self.align = check_choice(self.name, "align", align, fn.ALIGN_MODES)
        rows = self.initial_rows().expand(ctx.depth, ctx.num_heads, 2, dh)  # (depth, H, 2, Dh): axes x, y
        self.coeffs = nn.Parameter(rows.clone())
        self.register_buffer("dft", real_dft_basis(dh), persistent=False)  # (Dh, Dh): the compiled path
        self._tables = GridCache()

    def initial_rows(self) -> torch.Tensor:
        """(2, Dh) first rows (x, y) at init: zeros, or rope_2d's spectrum on the rotating modes."""
        dh = self.ctx.head_dim
        if self.init == "zero":
            return torch.zeros(2, dh)
        modes = dh // 2 - 1  # bins 1..modes rotate
        n_x = (modes + 1) // 2  # the first n_x modes turn with x, the other modes with y
        spectrum = fn.rope_inv_freq(dh // 4, self.base)  # base^(-4i/Dh), as rope_2d per axis
        theta = torch.zeros(2, modes)
        theta[0, :n_x] = spectrum[:n_x]
        theta[1, n_x:] = spectrum[: modes - n_x]
        return circulant_first_row(theta, dh)  # (2, Dh)

    def frequencies(self, block: int) -> torch.Tensor:
        """theta (H, 2, Dh//2 + 1) float32: the turn per patch of each Fourier bin along x and y."""
        return circulant_frequencies(self.coeffs[block])

    def positions(self, grid: Grid, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """x (column) and y (row) positions (N,) float32 of a row-major grid, cached per grid and strategy."""

        def build():
            yx = fn.grid_positions(grid, self.train_grid, self.strategy == "interpolate", self.align)  # (N, 2)
            ys, xs = yx.t().contiguous().to(device)
            return xs, ys

        return self._tables.get(build, grid, device, self.strategy, self.align)

    def rotation(self, grid: Grid, block: int, device: torch.device) -> torch.Tensor:
        """The rotations of block ``block``: built afresh at every call (the frequencies train)."""
        return self.build_rotation(tuple(grid), block, device)

    def build_rotation(self, grid: Grid, block: int, device: torch.device) -> torch.Tensor:
        """exp(i (x theta_x + y theta_y)) (H, N, Dh//2 + 1) complex64; angles in float32."""
        xs, ys = self.positions(grid, device)
        theta = self.frequencies(block)  # (H, 2, F)
        angles = xs[None, :, None] * theta[:, None, 0] + ys[None, :, None] * theta[:, None, 1]  # (H, N, F)
        return fn.rope_angles_to_complex(angles)

    def rotate_qk(self, q, k, grid, block):
        rot = self.rotation(grid, block, q.device)
        basis = self.dft if torch.compiler.is_compiling() else None  # see circulant_rotate
        with torch.autocast(q.device.type, enabled=False):  # float32, also under bf16 autocast; class tokens untouched
            return fn.on_grid_tokens(q, k, self.num_prefix_tokens, lambda x: circulant_rotate(x, rot, basis))

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, base={self.base}, init={self.init}"
