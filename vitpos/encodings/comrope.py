"""ComRoPE (Yu et al., CVPR 2025): rotary embeddings from trainable commuting angle matrices.

Each head's channels form blocks of ``b`` contiguous channels; a token at normalised position
x = (x_0, x_1) (row, column) turns q and k by::

    R(x) = exp(x_0 A_0 + x_1 A_1),  A_a = diag(B_a1, ..., B_am) skew-symmetric b x b blocks

so (R(x) q)^T (R(y) k) = q^T R(y - x) k depends on the offset only, because the A_a commute. ``ap``
(axial partition): B_aj = P_j - P_j^T if j = a (mod 2), else 0 (blocks alternate rows, columns,
...); ``ld`` (linearly dependent, default, the paper's best): B_aj = theta_aj (P_j - P_j^T).

Conventions (the authors' ``model.py``): positions are patch centres (i + 0.5) / n per axis, axis 0
the row; q' = R q on contiguous blocks; the class token is rotated at ``cls_position`` 0.5 (the
image centre); per layer, P (H, m, b, b) ~ N(0, 1) and LD's theta (axes, m) ~ N(0, 1), shared by the
heads; ``block_size`` 8. P = 0 gives R = I; with b = 2 AP is axial RoPE with learned frequencies.
Strategies: ``interpolate`` (default, the reference: normalised by the current grid) and
``extrapolate`` (normalised by the training grid: the training spacing, positions pass 1; the
class token moves with the image centre, ``cls_position`` times n / n_train per axis).

Deliberate differences: each axis normalised by its own length; R(x) = exp(x_0 A_0) exp(x_1 A_1)
(exact: they commute), one batched matrix_exp over the h + w coordinates; applied to the whole
batch in batched matmuls, in float32 also under autocast; ``cls_position=null`` leaves class tokens
unrotated; no training-time position perturbation, no video; rotations cached per grid in eval.

Provenance and checks: docs/encodings.md#comrope
"""

from __future__ import annotations

import numbers

import torch
from torch import nn

from . import functional as fn
from .base import EncodingContext, Grid, GridCache, OptionError, PositionalEncoding, check_choice, register

VARIANTS = ("ld", "ap")
MAX_CACHED_GRIDS = 4  # evaluation rotations kept per encoding: (depth, H, P + N, Dh, Dh) float32 per grid


def skew(p: torch.Tensor) -> torch.Tensor:
    """P - P^T over the last two axes: a skew-symmetric matrix (its exponential is a rotation)."""
    return p - p.transpose(-1, -2)


def block_diagonal(blocks: torch.Tensor) -> torch.Tensor:
    """(..., m, b, b) blocks -> (..., m b, m b) block-diagonal matrices (block j on channels [j b, (j + 1) b))."""
    m, b = blocks.shape[-3], blocks.shape[-1]
    eye = torch.eye(m, dtype=blocks.dtype, device=blocks.device)
    return torch.einsum("...kij,kl->...kilj", blocks, eye).reshape(*blocks.shape[:-3], m * b, m * b)


def apply_rotation(x: torch.Tensor, rot: torch.Tensor) -> torch.Tensor:
    """R x per head and token, in float32, cast back to x's dtype.

    x: (B, H, T, Dh); rot: (H, T, Dh, Dh). One batched matmul over the H * T
    tokens, (B, Dh) @ R^T each: on CPU the dense form beats a per-block einsum,
    whose batched 8 x 8 products are too small (docs/performance.md, "Why the
    kernels are written as they are"). Autocast is off inside: a bfloat16 matmul
    would round the rotation to 8 bits. Returns a (B, H, T, Dh) view of a
    (H, T, B, Dh) tensor.
    """
    b_, h, t, dh = x.shape
    with torch.autocast(x.device.type, enabled=False):
        rows = x.permute(1, 2, 0, 3).to(torch.float32, memory_format=torch.contiguous_format)  # one copy
        rows = rows.reshape(h * t, b_, dh)  # (H*T, B, Dh); a view unless .to kept a float32 x as it was
        out = torch.bmm(rows, rot.float().reshape(h * t, dh, dh).transpose(1, 2))  # (H*T, B, Dh): (R x)^T
    return out.view(h, t, b_, dh).permute(2, 0, 1, 3).type_as(x)  # (B, H, T, Dh)


def check_block_size(name: str, block_size, head_dim: int, multiple: int, fix: str) -> int:
    """``block_size`` if it is an integer >= 2 with ``multiple * block_size`` dividing the head dim."""
    ok = isinstance(block_size, numbers.Integral) and not isinstance(block_size, bool) and block_size >= 2
    if not ok or head_dim % (multiple * block_size):
        need = f"{multiple} * block_size" if multiple > 1 else "block_size"
        raise OptionError(
            "block_size",
            f"encoding.block_size must be an integer >= 2 with {need} dividing the head dim "
            f"(model.dim / model.num_heads = {head_dim}) for encoding '{name}', got {block_size!r} ({fix})",
        )
    return int(block_size)


class BlockRotaryBase(PositionalEncoding):
    """Per-token block rotations (H, P + N, m, b, b) applied to q and k (ComRoPE, LieRE).

    Subclasses build the rotations of one block (``block`` an int: (H, T, m, b, b))
    or of every block at once (``block`` None: (depth, H, T, m, b, b)). While the
    parameters train (:meth:`GridCache.parameters_train`: with gradients, or compiling)
    they are rebuilt at every call, inside the compiled graph; otherwise (evaluation)
    they are built once per grid for all blocks and cached until a parameter changes
    (its ``_version`` counts in-place updates: optimizer steps, ``load_state_dict``),
    for up to ``MAX_CACHED_GRIDS`` grids. Rotations are always built and applied in
    float32, also under autocast.
    """

    grid_dims = (2,)

    def __init__(self, ctx: EncodingContext, strategy: str | None = None):
        super().__init__(ctx, strategy)
        self._tables = GridCache(MAX_CACHED_GRIDS)  # evaluating size after size: keep memory bounded

    def build_rotation(self, grid: Grid, block: int | None, device: torch.device) -> torch.Tensor:
        """The rotation blocks of block ``block`` (None: of every block) on ``grid``, on ``device``."""
        raise NotImplementedError

    def rotation(self, grid: Grid, block: int, device: torch.device) -> torch.Tensor:
        """(H, P + N, Dh, Dh) float32 block-diagonal rotations of block ``block`` on ``grid``."""
        grid = tuple(grid)
        if GridCache.parameters_train():
            return self.float32_rotations(grid, block, device)

        def every_block() -> tuple[torch.Tensor, ...]:
            return self.float32_rotations(grid, None, device).unbind(0)

        return self._tables.get(every_block, grid, device, self.strategy, version=GridCache.version_of(self))[block]

    def float32_rotations(self, grid: Grid, block: int | None, device: torch.device) -> torch.Tensor:
        """The block-diagonal (..., H, P + N, Dh, Dh) rotations, built in float32 also under autocast."""
        with torch.autocast(self._param_device_type(), enabled=False):
            return block_diagonal(self.build_rotation(grid, block, device))

    def _param_device_type(self) -> str:
        param = next(self.parameters(), None)
        return "cpu" if param is None else param.device.type

    def rotate_qk(self, q, k, grid, block):
        rot = self.rotation(grid, block, q.device)  # (H, P + N, Dh, Dh)
        return apply_rotation(q, rot), apply_rotation(k, rot)

    def _block_slice(self, p: torch.Tensor, block: int | None) -> torch.Tensor:
        """Parameters (depth, ...) of one block (as a leading axis of 1) or of all."""
        return p if block is None else p[block : block + 1]

    def _finish(self, rot: torch.Tensor, block: int | None) -> torch.Tensor:
        return rot if block is None else rot[0]


@register
class ComRoPE(BlockRotaryBase):
    """ComRoPE-LD (default) or -AP: R(x) = exp(x_0 A_0 + x_1 A_1) with commuting
    block-diagonal skew-symmetric A_a, per block and head. See the module docstring.

    Options: ``variant`` ld | ap; ``block_size`` b (8); ``init_std`` of P (1.0);
    ``cls_position``: the class token's coordinate on both axes as a fraction of
    the image (0.5, its centre, as the authors), or null: not rotated.
    """

    name = "comrope"
    strategies = ("interpolate", "extrapolate")

    def __init__(
        self,
        ctx: EncodingContext,
        strategy: str | None = None,
        variant: str = "ld",
        block_size: int = 8,
        init_std: float = 1.0,
        cls_position: float | None = 0.5,
    ):
        super().__init__(ctx, strategy)
        self.variant = check_choice(self.name, "variant", variant, VARIANTS)
        multiple = 2 if variant == "ap" else 1  # AP: half the head width per axis
        self.block_size = check_block_size(self.name, block_size, ctx.head_dim, multiple, "e.g. the paper's 8, or 2")
        if isinstance(init_std, bool) or not isinstance(init_std, numbers.Real) or not init_std >= 0:
            raise OptionError("init_std", f"encoding.init_std must be >= 0, got {init_std!r} (default 1.0)")
        if cls_position is not None and (isinstance(cls_position, bool) or not isinstance(cls_position, numbers.Real)):
            raise OptionError(
                "cls_position",
                f"encoding.cls_position must be a number or null, got {cls_position!r} (default 0.5: the image centre)",
            )
        self.init_std, self.cls_position = float(init_std), cls_position
        b, m = self.block_size, ctx.head_dim // self.block_size
        self.freqs = nn.Parameter(torch.randn(ctx.depth, ctx.num_heads, m, b, b) * init_std)  # P: (depth, H, m, b, b)
        if variant == "ld":
            self.multiplier = nn.Parameter(torch.randn(ctx.depth, 2, m))  # theta: (depth, axes, m)
        else:
            axis_of_block = torch.arange(m) % 2  # block j turns with axis j mod 2
            self.register_buffer("axis_mask", (axis_of_block == torch.arange(2)[:, None]).float(), persistent=False)

    def coordinates(self, grid: Grid) -> list[torch.Tensor]:
        """Per axis (rows, then columns): (n,) float32 normalised patch centres."""
        interpolate = self.strategy == "interpolate"
        return [
            (torch.arange(n, dtype=torch.float32) + 0.5) / (n if interpolate else nt)
            for n, nt in zip(grid, self.train_grid)
        ]

    def generators(self, block: int | None) -> torch.Tensor:
        """A_a per block: (L, H, axes, m, b, b) float32, L = 1 or depth."""
        s = skew(self._block_slice(self.freqs, block).float())  # (L, H, m, b, b)
        if self.variant == "ld":
            theta = self._block_slice(self.multiplier, block).float()  # (L, axes, m)
            return theta[:, None, :, :, None, None] * s[:, :, None]
        return self.axis_mask[None, None, :, :, None, None] * s[:, :, None]

    def class_coordinates(self, grid: Grid) -> list[torch.Tensor]:
        """Per axis: the class token's (1,) float32 coordinate, ``cls_position`` of the image's extent
        in the units of :meth:`coordinates` (1 under ``interpolate``, n / n_train under ``extrapolate``),
        so 0.5 stays the centre of the current image; 0 (unrotated) for ``cls_position`` null."""
        cls = 0.0 if self.cls_position is None else float(self.cls_position)
        if self.strategy == "interpolate":
            return [torch.full((1,), cls) for _ in grid]
        return [torch.full((1,), cls) * (n / nt) for n, nt in zip(grid, self.train_grid)]

    def build_rotation(self, grid, block, device):
        gen = self.generators(block)  # (L, H, 2, m, b, b)
        h, w = grid
        per_axis = []
        for axis, (cls, coords) in enumerate(zip(self.class_coordinates(grid), self.coordinates(grid))):
            values = torch.cat([cls, coords]).to(device)  # (1 + n,): the class token's first
            per_axis.append(torch.linalg.matrix_exp(values[:, None, None, None] * gen[:, :, axis, None]))
        # (L, H, 1 + n_a, m, b, b) each: exp(x_a A_a) for every coordinate value x_a of axis a
        lead = torch.zeros(self.num_prefix_tokens, 2, dtype=torch.long)  # class tokens: the values at index 0
        index = torch.cat([lead, 1 + fn.grid_points(torch.arange(h), torch.arange(w))]).to(device)  # (P + N, 2)
        rot = per_axis[0][:, :, index[:, 0]] @ per_axis[1][:, :, index[:, 1]]
        return self._finish(rot, block)  # (L, H, P + N, m, b, b), or without L

    def extra_repr(self) -> str:
        extra = f"variant={self.variant}, block_size={self.block_size}, cls_position={self.cls_position}"
        return f"{super().extra_repr()}, {extra}"
