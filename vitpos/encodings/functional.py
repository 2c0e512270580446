"""Pure functions behind the encodings: tables, frequencies, rotations, resampling.

Everything here is stateless and testable on its own; the modules in this
package are thin wrappers that decide *when* to call these. The helpers that
keep sizes symbolic under ``torch.export`` live in :mod:`vitpos.encodings.symbolic_sizes`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .symbolic_sizes import is_size, resize_bicubic, scales, shrinks

# ------------------------------------------------------------------ sinusoids


def sincos_1d(positions: torch.Tensor, dim: int, temperature: float = 10000.0) -> torch.Tensor:
    """Sinusoidal table (Vaswani et al., 2017): [sin(p w_i), cos(p w_i)], w_i = T^(-2i/dim).

    positions: (N,) float or int. Returns (N, dim) float32. The sin and cos
    halves are concatenated rather than interleaved (a fixed channel permutation).
    """
    if dim % 2:
        raise ValueError(f"sinusoidal encodings need an even width, got {dim}")
    omega = temperature ** (-torch.arange(dim // 2, dtype=torch.float32) * 2 / dim)
    angles = positions.float()[:, None] * omega[None, :]  # (N, dim/2)
    return torch.cat([angles.sin(), angles.cos()], dim=1)


def sincos_2d(rows: torch.Tensor, cols: torch.Tensor, dim: int, temperature: float = 10000.0) -> torch.Tensor:
    """2D sinusoidal table: half the channels encode the row, half the column.

    Frequencies are T^(-i/(dim/4)), i < dim/4, per axis (as MoCo v3 and timm's
    ``build_sincos2d_pos_embed``). rows: (h,), cols: (w,). Returns (h*w, dim),
    row-major over the grid.
    """
    if dim % 4:
        raise ValueError(f"2D sinusoidal encodings need a width divisible by 4, got {dim}")
    h, w = rows.shape[0], cols.shape[0]  # not len(): torch.export keeps shape[0] symbolic, len() fixes it
    row_part = sincos_1d(rows, dim // 2, temperature)  # (h, D/2)
    col_part = sincos_1d(cols, dim // 2, temperature)  # (w, D/2)
    row_part = row_part[:, None, :].expand(h, w, dim // 2)
    col_part = col_part[None, :, :].expand(h, w, dim // 2)
    return torch.cat([row_part, col_part], dim=-1).reshape(h * w, dim)  # (h*w, D)


# ------------------------------------------------------------------ positions

ALIGN_MODES = ("corners", "ratio")


def axis_positions(n: int, n_train: int, interpolate: bool, image: bool, align: str = "corners") -> torch.Tensor:
    """Positions (n,) float32 along one axis of ``n`` tokens trained with ``n_train``.

    ``interpolate`` is position interpolation (Chen et al. 2023). On image
    axes, for larger and smaller grids alike, ``align`` picks the map:
    ``corners`` (default) scales by (n_train - 1)/(n - 1) so the new grid's
    extreme positions land on the trained extremes; ``ratio`` scales by
    n_train / n (timm's ``ref_feat_shape``, EVA), whose last position falls
    short of the trained last one. On sequences positions are divided by
    s = n / n_train (Chen et al.), only when the sequence is longer than in
    training; ``align`` does not apply.
    """
    pos = torch.arange(n, dtype=torch.float32)
    if not interpolate or is_size(n, n_train):
        return pos
    if image:  # a symbolic n (torch.export) takes the formula, which is the identity at n = n_train
        return pos * n_train / n if align == "ratio" else pos * (n_train - 1) / torch.sym_max(n - 1, 1)
    return pos * n_train / n if n > n_train else pos


def grid_points(ys: torch.Tensor, xs: torch.Tensor) -> torch.Tensor:
    """(h*w, 2) (y, x) points of a row-major grid from its row values ys (h,) and column values xs (w,)."""
    yy, xx = torch.meshgrid(ys, xs, indexing="ij")  # (h, w) each
    return torch.stack([yy.flatten(), xx.flatten()], -1)


def grid_positions(grid: tuple[int, ...], train_grid: tuple[int, ...], interpolate: bool, align: str) -> torch.Tensor:
    """(N, len(grid)) float32 positions of the row-major grid tokens, per axis (y, x on images) from
    :func:`axis_positions` against the training grid."""
    if len(grid) == 1:
        return axis_positions(grid[0], train_grid[0], interpolate, False, align)[:, None]  # (N, 1)
    (h, w), (ht, wt) = grid, train_grid
    return grid_points(axis_positions(h, ht, interpolate, True, align), axis_positions(w, wt, interpolate, True, align))


def grid_coords(h: int, w: int, device=None) -> torch.Tensor:
    """(h*w, 2) float (y, x) coordinates of a row-major patch grid."""
    return grid_points(torch.arange(h, device=device), torch.arange(w, device=device)).float()


def key_offsets_2d(h: int, w: int) -> torch.Tensor:
    """(N, N, 2) float32 offsets (dy, dx) = p_key - p_query between the patch
    centres of a row-major h x w grid, in patches; rows grow downwards (dy > 0:
    the key lies below the query). Note the sign: Swin's index uses q - k."""
    coords = grid_coords(h, w)  # (N, 2)
    return coords[None, :, :] - coords[:, None, :]  # (N_query, N_key, 2)


def euclidean_distance_2d(h: int, w: int) -> torch.Tensor:
    """(N, N) float32 Euclidean distance between the centres of patches i and j, in patches."""
    return key_offsets_2d(h, w).norm(dim=-1)


# ----------------------------------------------------------------- resampling


def resample_table_1d(table: torch.Tensor, n_new: int) -> torch.Tensor:
    """Linearly resample a (n, D) sequence table to (n_new, D), ends on ends
    (align_corners); identity when sizes match."""
    if is_size(n_new, table.shape[0]):
        return table
    x = table.t()[None]  # (1, D, n)
    x = F.interpolate(x.float(), size=n_new, mode="linear", align_corners=True)
    return x[0].t().to(table.dtype)  # (n_new, D)


def resample_axis_bicubic(table: torch.Tensor, n_new: int, antialias: bool | torch.Tensor) -> torch.Tensor:
    """Bicubically resample a (n, D) table along its first axis to (n_new, D).

    The 1D building block of factorized tables (``learned_2d``'s rows and
    columns): it equals resizing a 2D table that is constant along the other
    axis with :func:`resample_table_2d` (bicubic weights sum to one). The axis
    is laid out as the *width* of a (1, D, 1, n) image, because PyTorch's
    antialiased bicubic on an image one pixel wide returns its first row for
    every output row (torch 2.x): the (h, 1) layout silently erased every row.
    """
    if is_size(n_new, table.shape[0]):
        return table
    x = table.t()[None, :, None, :].float()  # (1, D, 1, n)
    x = resize_bicubic(x, (1, n_new), antialias)
    return x[0, :, 0].t().to(table.dtype)  # (n_new, D)


def resample_axis_linear(table: torch.Tensor, n_new: int) -> torch.Tensor:
    """Linearly resample a (n, D) axis table to (n_new, D) with ``align_corners=False``:
    the pixel-centre convention of timm's factorized tables (``naflexvit.py``)."""
    if is_size(n_new, table.shape[0]):
        return table
    x = table.t()[None].float()  # (1, D, n)
    x = F.interpolate(x, size=n_new, mode="linear", align_corners=False)
    return x[0].t().to(table.dtype)  # (n_new, D)


def resample_table_2d(
    table: torch.Tensor, old: tuple[int, int], new: tuple[int, int], antialias: bool | torch.Tensor | None = None
) -> torch.Tensor:
    """Bicubically resample a (h*w, D) row-major table to the grid ``new``.

    Identity when the grids match (as timm's ``resample_abs_pos_embed``).
    ``antialias``: None (default) turns it on only when the grid shrinks along
    some axis, so upsizing is plain bicubic (PyTorch's antialiased kernel is a
    different cubic, a = -0.5, even when enlarging); True always, as timm does
    (a 0-d bool tensor for symbolic sizes: :func:`~vitpos.encodings.symbolic_sizes.shrinks`).
    """
    if all(is_size(n, m) for n, m in zip(new, old)):
        return table
    h, w = old
    if antialias is None:
        antialias = shrinks(new, old)
    x = table.reshape(h, w, -1).permute(2, 0, 1)[None].float()  # (1, D, h, w)
    if new[1] == 1 and new[0] != h and antialias:  # integer sizes only: a symbolic side is never 1
        # the width-one trap of resample_axis_bicubic: resize the transposed grid instead
        x = F.interpolate(x.transpose(2, 3), size=new[::-1], mode="bicubic", align_corners=False, antialias=True)
        x = x.transpose(2, 3)  # (1, D, h', w')
    else:
        x = resize_bicubic(x, new, antialias)
    return x[0].permute(1, 2, 0).reshape(new[0] * new[1], -1).to(table.dtype)  # (h'*w', D)


# ----------------------------------------------------------------------- RoPE


def rope_inv_freq(num_pairs: int, base: float) -> torch.Tensor:
    """Rotary frequencies base^(-i/num_pairs), i < num_pairs (Su et al., 2021): (num_pairs,) float32.

    Over a head of width Dh this is the 1D RoPE spectrum base^(-2i/Dh) with
    num_pairs = Dh/2, and the per-axis spectrum base^(-4i/Dh) of axial 2D RoPE
    (RoPE-ViT) with num_pairs = Dh/4.
    """
    exponent = torch.arange(num_pairs, dtype=torch.float32) / num_pairs
    return base ** (-exponent)


def ntk_base(base: float, scale: float | torch.Tensor, rotary_dim: int) -> float | torch.Tensor:
    """NTK-aware base: base * s^(d/(d-2)) (bloc97, 2023), d the rotated width."""
    return base * scale ** (rotary_dim / (rotary_dim - 2))


YARN_RAMPS = ("index", "turns")


def yarn_correction_range(
    num_pairs: int, base: float, train_length: float, beta_fast: float, beta_slow: float
) -> tuple[int, int]:
    """The pair indices (low, high) between which YaRN's released code ramps.

    For a spectrum base^(-2i/d) over d = 2 * num_pairs channels, pair i turns
    r = L base^(-2i/d) / (2 pi) times over the training length L, so r = beta
    at i = d ln(L / (2 pi beta)) / (2 ln base). As the authors' code and HF's
    ``_compute_yarn_parameters`` (``truncate=True``): floor the beta_fast index,
    ceil the beta_slow one, clamp to [0, d - 1].
    """
    d = 2 * num_pairs

    def pair_index(turns: float) -> float:
        return d * math.log(train_length / (turns * 2 * math.pi)) / (2 * math.log(base))

    return max(math.floor(pair_index(beta_fast)), 0), min(math.ceil(pair_index(beta_slow)), d - 1)


def yarn_inv_freq(
    inv_freq: torch.Tensor,
    scale: float,
    train_length: float,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    ramp: str = "index",
    base: float | None = None,
) -> torch.Tensor:
    """YaRN "NTK-by-parts" frequencies (Peng et al., 2023).

    Each frequency blends interpolation (theta / s) and extrapolation (theta)
    with a weight gamma in [0, 1] (1 = keep):

    - ``index`` (default; the authors' released code and HF
      ``_compute_yarn_parameters``): gamma = 1 - clamp((i - low) / (high - low))
      over the pair index i, with (low, high) from
      :func:`yarn_correction_range`. Needs ``base``, the spectrum being
      base^(-2i/d), d = 2 * len(inv_freq).
    - ``turns`` (the paper's eq. 18-19): gamma = clamp((r - beta_slow) /
      (beta_fast - beta_slow)) over r = L / wavelength, the turns a frequency
      makes over the training length.
    """
    if ramp not in YARN_RAMPS:
        raise ValueError(f"unknown YaRN ramp '{ramp}'; valid: {', '.join(YARN_RAMPS)} (encoding.yarn_ramp=...)")
    if not scales(scale):
        return inv_freq
    if ramp == "turns":
        turns = train_length * inv_freq / (2 * math.pi)  # r = L / lambda
        keep = ((turns - beta_slow) / (beta_fast - beta_slow)).clamp(0.0, 1.0)  # gamma
    else:
        if base is None:
            raise ValueError("yarn_inv_freq(ramp='index') needs the RoPE base")
        low, high = yarn_correction_range(len(inv_freq), base, train_length, beta_fast, beta_slow)
        if low == high:
            high += 0.001  # as the released code: avoid a zero-width ramp
        index = torch.arange(len(inv_freq), dtype=torch.float32)
        keep = 1 - ((index - low) / (high - low)).clamp(0.0, 1.0)  # gamma
    return inv_freq / scale * (1 - keep) + inv_freq * keep


def yarn_attention_factor(scale: float | torch.Tensor) -> float | torch.Tensor:
    """YaRN's q and k multiplier sqrt(1/t) = 0.1 ln(s) + 1 (1 when s <= 1); a tensor for a symbolic
    scale (:func:`~vitpos.encodings.symbolic_sizes.size_ratio`)."""
    if isinstance(scale, torch.Tensor):
        return 0.1 * torch.log(scale) + 1.0
    return 1.0 if scale <= 1.0 else 0.1 * math.log(scale) + 1.0


def rope_angles_to_complex(angles: torch.Tensor, magnitude: float | torch.Tensor = 1.0) -> torch.Tensor:
    """exp(i * angles) * magnitude as complex64; angles in float32 (``magnitude``: a number, or a 0-d
    tensor where it depends on a symbolic size)."""
    if isinstance(magnitude, torch.Tensor):
        return torch.polar(magnitude.float().expand(angles.shape), angles.float())
    return torch.polar(torch.full_like(angles, magnitude), angles.float())


def apply_rotary(x: torch.Tensor, rot: torch.Tensor, layout: str = "interleaved") -> torch.Tensor:
    """Rotate the channel pairs of x by the unit complex numbers ``rot``.

    x: (..., N, Dh); rot: complex, broadcastable to (..., N, Dh/2). RoPE as
    RoFormer writes it (Su et al. 2021): a pair (x_2i, x_2i+1) read as the
    complex number x_2i + i x_2i+1 is multiplied by e^(i m theta_i) (sec. 3.2.1,
    the 2D case), which is the block-diagonal rotation R_m x of sec. 3.2.2 and
    the cos/sin form x * cos + rotate(x) * sin of sec. 3.4.2.
    The product is taken in float32 and cast back, also under bf16 autocast:
    a bfloat16 angle keeps 8 significant bits, so near position 1000 it is off
    by up to 2 radians (tests/test_bf16.py checks the float32 path).
    Pairs are (2i, 2i+1) for ``interleaved`` (RoFormer, Meta's LLaMA) or
    (i, i + Dh/2) for ``half`` (GPT-NeoX, HF "rotate_half"). Why the complex
    multiply: in eager mode on CPU it beats the rotate-half form, compiled or
    not, and timm's and rotary-embedding-torch's rotations (one fused complex
    product instead of several real ones). Under ``torch.compile`` the ``half``
    layout is written in real arithmetic, which inductor fuses into one kernel,
    where the complex form pays for its two layout copies; the interleaved
    complex multiply stays, as it beats its fused real form. The figures:
    docs/performance.md, "Why the kernels are written as they are" (bench/rope.py).
    """
    dh = x.shape[-1]
    if layout not in ("interleaved", "half"):
        raise ValueError(f"unknown RoPE layout '{layout}'; valid: interleaved, half")
    if layout == "half" and torch.compiler.is_compiling():
        return _rotate_half_real(x, rot)
    if layout == "interleaved":
        pairs = x.float().reshape(*x.shape[:-1], dh // 2, 2)  # (..., N, Dh/2, 2)
        out = torch.view_as_real(torch.view_as_complex(pairs) * rot)
        return out.flatten(-2).type_as(x)
    pairs = x.float().unflatten(-1, (2, dh // 2)).transpose(-1, -2).contiguous()  # (..., N, Dh/2, 2)
    out = torch.view_as_real(torch.view_as_complex(pairs) * rot)  # (..., N, Dh/2, 2)
    return out.transpose(-1, -2).flatten(-2).type_as(x)


def _rotate_half_real(x: torch.Tensor, rot: torch.Tensor) -> torch.Tensor:
    """:func:`apply_rotary`'s ``half`` layout in real arithmetic: (a + ib)(c + is) = (ac - bs) + i(as + bc)."""
    cos, sin = rot.real, rot.imag  # (..., N, Dh/2)
    a, b = x.float().chunk(2, dim=-1)  # (..., N, Dh/2) each: the pair (i, i + Dh/2)
    return torch.cat([a * cos - b * sin, a * sin + b * cos], -1).type_as(x)


def on_grid_tokens(q: torch.Tensor, k: torch.Tensor, prefix: int, rotate, prefix_scale: float | torch.Tensor = 1.0):
    """``rotate`` applied to the grid tokens of q and k (B, H, P + N, Dh); the ``prefix`` (class)
    tokens in front pass unrotated, times ``prefix_scale`` (YaRN's temperature) unless it is 1."""
    if prefix == 0:
        return rotate(q), rotate(k)

    def one(x: torch.Tensor) -> torch.Tensor:
        unscaled = isinstance(prefix_scale, (int, float)) and prefix_scale == 1.0  # a tensor: symbolic
        head = x[:, :, :prefix] if unscaled else x[:, :, :prefix] * prefix_scale
        return torch.cat([head, rotate(x[:, :, prefix:])], dim=2)  # (B, H, P + N, Dh')

    return one(q), one(k)


# ------------------------------------------------------------------- offsets


def relative_position_index_2d(h: int, w: int, table_grid: tuple[int, int] | None = None) -> torch.Tensor:
    """Swin's index: (h*w, h*w) ints in [0, (2h-1)(2w-1)), a bijection of the
    (dy, dx) offsets q - k of every token pair onto a flat table (Liu et al., 2021).

    ``table_grid`` (h_t, w_t): index the (2h_t-1)(2w_t-1) table of that grid instead, each offset
    clamped to its range (the grid's own by default, where nothing is clamped)."""
    ht, wt = (h, w) if table_grid is None else table_grid
    coords = grid_points(torch.arange(h), torch.arange(w)).t()  # (2, N)
    rel = coords[:, :, None] - coords[:, None, :]  # (2, N, N) offsets q - k
    dy = rel[0].clamp(-(ht - 1), ht - 1) + ht - 1
    dx = rel[1].clamp(-(wt - 1), wt - 1) + wt - 1
    return dy * (2 * wt - 1) + dx  # (N, N)


def pad_prefix(bias: torch.Tensor, prefix: int) -> torch.Tensor:
    """(..., N, N) -> (..., P + N, P + N): zero rows and columns for the prefix (class) tokens."""
    return F.pad(bias, (prefix, 0, prefix, 0)) if prefix else bias


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi head slopes (Press et al., 2022): 2^(-8h/H) for h = 1..H when H is a
    power of two; otherwise the slopes of the nearest lower power of two followed
    by every other slope of the next power of two, as in the paper's code."""

    def power_of_two_slopes(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

    if num_heads & (num_heads - 1) == 0:
        return torch.tensor(power_of_two_slopes(num_heads))
    lower = 2 ** math.floor(math.log2(num_heads))
    extra = power_of_two_slopes(2 * lower)[0::2][: num_heads - lower]
    return torch.tensor(power_of_two_slopes(lower) + extra)


# ------------------------------------------------------- skew-symmetric matrices


def skew_index(b: int) -> torch.Tensor:
    """(b * b,) positions in [0, 1 + U, -U] (U the b (b - 1) / 2 strictly-upper entries, row-major) of
    each entry of the skew matrix U - U^T: 0 on the diagonal, k above it, k + b (b - 1) / 2 below."""
    rows, cols = torch.triu_indices(b, b, offset=1)  # (b(b-1)/2,) each
    index = torch.zeros(b, b, dtype=torch.long)
    k = torch.arange(1, len(rows) + 1)
    index[rows, cols] = k
    index[cols, rows] = k + len(rows)
    return index.flatten()


def packed_skew(upper: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """(..., b (b - 1) / 2) strictly-upper entries -> (..., b, b) skew-symmetric U - U^T.

    ``index``: :func:`skew_index` of b."""
    b = math.isqrt(len(index))
    padded = torch.cat([upper.new_zeros(*upper.shape[:-1], 1), upper, -upper], -1)  # (..., 1 + b(b-1))
    return padded[..., index].unflatten(-1, (b, b))  # (..., b, b)
