"""DINOv3's RoPE (Siméoni et al. 2025): axial 2D rotary embeddings on normalised patch centres.

Patch (r, c) of an h x w grid sits at y = 2 (r + 1/2) / d_h - 1, x = 2 (c + 1/2) / d_w - 1, with
(d_h, d_w) = (h, w) for ``normalize_coords=separate`` (the default: both axes span [-1, 1]),
(min(h, w),) * 2 for ``min`` or (max(h, w),) * 2 for ``max`` (the longer axis spans [-1, 1]; as in
DINOv3 the shorter one is not re-centred). Periods T_j = base^(4j/Dh), j < Dh/4 (base 100), or,
given ``min_period`` and ``max_period``, geometric from the one to the other. Pair j turns by
2 pi y / T_j, pair Dh/4 + j by 2 pi x / T_j; pairs are (i, i + Dh/2) (the rotate-half layout).
Class tokens are not rotated.

"RoPE-box jittering" (paper sec. 3.2), in training mode only, one draw per forward shared by every
block, from torch's RNG in DINOv3's order: ``shift_coords`` s: y, x += U(-s, s) each;
``jitter_coords`` J: y, x *= exp(U(-ln J, ln J)) each; ``rescale_coords`` R: both *= exp(U(-ln R,
ln R)). A shift changes no logit; jitter and rescale change the spacing the model sees. Defaults:
every released DINOv3 ViT's (base 100, ``separate``, ``rescale_coords=2``, no shift or jitter).

Other grids: ``normalize`` (default; alias ``interpolate``) maps every grid to the [-1, 1] box, as
DINOv3 does; ``extrapolate`` keeps the training grid's spacing (d from the training grid), so a
larger grid reaches past +1 (the same rotations on the training grid).

Deliberate differences: angles in float32 (DINOv3's class default is bf16); ``base`` with both
periods set uses the periods, as timm (DINOv3 raises); the augmentation is drawn on q's device;
the ``extrapolate`` strategy is ours.

Provenance and checks: docs/encodings.md#dinov3-rope
"""

from __future__ import annotations

import math
import numbers

import torch

from . import functional as fn
from .base import (
    EncodingContext,
    Grid,
    GridCache,
    OptionError,
    PositionalEncoding,
    check_choice,
    check_head_dim,
    check_positive,
    register,
)

NORMALIZE_MODES = ("separate", "min", "max")
AUGMENTS = ("shift_coords", "jitter_coords", "rescale_coords")


def dinov3_periods(head_dim: int, base: float | None, min_period=None, max_period=None) -> torch.Tensor:
    """(Dh/4,) float32 periods: base^(2j/(Dh/2)), or min_period..max_period geometrically (DINOv3's form)."""
    n = head_dim // 4
    if min_period is not None and max_period is not None:
        ratio = max_period / min_period
        return ratio ** torch.linspace(0, 1, n, dtype=torch.float32) / ratio * max_period
    return base ** (2 * torch.arange(n, dtype=torch.float32) / (head_dim // 2))


def patch_centres(grid: Grid, ref: Grid, mode: str) -> torch.Tensor:
    """(h*w, 2) float32 (y, x) centres of a row-major grid, normalised by the sizes of ``ref``."""
    d = {"separate": tuple(ref), "min": (min(ref),) * 2, "max": (max(ref),) * 2}[mode]
    ys, xs = (torch.arange(0.5, n, dtype=torch.float32) / dn for n, dn in zip(grid, d))
    return 2.0 * fn.grid_points(ys, xs) - 1.0  # (h*w, 2)


def dinov3_rotation(coords: torch.Tensor, periods: torch.Tensor) -> torch.Tensor:
    """Complex (N, Dh/2) rotations: the y pairs, then the x pairs, for the half layout."""
    angles = 2 * math.pi * coords.float()[:, :, None] / periods  # (N, 2, Dh/4)
    return fn.rope_angles_to_complex(angles.flatten(1))  # (N, Dh/2)


def _check_factor(option: str, value, low: float, what: str):
    bad = isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value >= low)
    if value is not None and bad:
        raise OptionError(
            option,
            f"encoding.{option} must be null (off) or a number >= {low:g} ({what}), got {value!r}; "
            "DINOv3's ViTs use rescale_coords=2 and no shift or jitter",
        )
    return None if value is None else float(value)


@register
class RoPE2DDinoV3(PositionalEncoding):
    """DINOv3's axial RoPE on normalised coordinates, with its training-time
    coordinate augmentations (see the module docstring)."""

    name = "rope_2d_dinov3"
    grid_dims = (2,)
    strategies = ("normalize", "extrapolate")
    strategy_aliases = {"interpolate": "normalize"}  # a normalised box interpolates any grid

    def __init__(
        self,
        ctx: EncodingContext,
        strategy: str | None = None,
        base: float | None = 100.0,
        min_period: float | None = None,
        max_period: float | None = None,
        normalize_coords: str = "separate",
        shift_coords: float | None = None,
        jitter_coords: float | None = None,
        rescale_coords: float | None = 2.0,
    ):
        super().__init__(ctx, strategy)
        check_head_dim(self.name, ctx, 4)
        check_positive("base", base, "e.g. DINOv3's 100.0, or null with encoding.min_period/max_period", True)
        for option, value in (("min_period", min_period), ("max_period", max_period)):
            check_positive(option, value, "null: the periods come from encoding.base", allow_none=True)
        if (min_period is None) != (max_period is None):
            missing = "max_period" if max_period is None else "min_period"
            raise OptionError(
                missing,
                f"encoding.{missing} is null but its partner is set: set both encoding.min_period and "
                "encoding.max_period, or neither (periods from encoding.base)",
            )
        if base is None and min_period is None:
            raise OptionError(
                "base",
                "encoding.base is null and no periods are set: set encoding.base=100.0 (DINOv3) "
                "or both encoding.min_period and encoding.max_period",
            )
        self.base, self.min_period, self.max_period = base, min_period, max_period
        self.normalize_coords = check_choice(self.name, "normalize_coords", normalize_coords, NORMALIZE_MODES)
        self.shift_coords = _check_factor("shift_coords", shift_coords, 0.0, "a shift of the box, uniform in [-s, s]")
        self.jitter_coords = _check_factor("jitter_coords", jitter_coords, 1.0, "a per-axis factor in [1/J, J]")
        self.rescale_coords = _check_factor("rescale_coords", rescale_coords, 1.0, "a shared factor in [1/R, R]")
        self.augments = any(getattr(self, n) is not None for n in AUGMENTS)
        self.register_buffer("periods", dinov3_periods(ctx.head_dim, base, min_period, max_period), persistent=False)
        self._tables = GridCache()
        self._draw: tuple[Grid, torch.Tensor] | None = None  # this training forward's (grid, rotation)

    def coords(self, grid: Grid, device: torch.device) -> torch.Tensor:
        """(N, 2) (y, x) centres before augmentation, cached per grid/strategy/device."""
        ref = grid if self.strategy == "normalize" else self.train_grid

        def centres() -> torch.Tensor:
            return patch_centres(grid, ref, self.normalize_coords).to(device)

        return self._tables.get(centres, grid, device, "coords", self.strategy)

    def augment(self, coords: torch.Tensor) -> torch.Tensor:
        """One draw of shift, jitter and rescale (DINOv3's order and RNG calls) applied to (N, 2) ``coords``."""
        dd = {"device": coords.device, "dtype": coords.dtype}
        if self.shift_coords is not None:
            coords = coords + torch.empty(2, **dd).uniform_(-self.shift_coords, self.shift_coords)[None, :]
        if self.jitter_coords is not None:
            m = math.log(self.jitter_coords)
            coords = coords * torch.empty(2, **dd).uniform_(-m, m).exp()[None, :]
        if self.rescale_coords is not None:
            m = math.log(self.rescale_coords)
            coords = coords * torch.empty(1, **dd).uniform_(-m, m).exp()
        return coords

    def rotation(self, grid: Grid, block: int, device: torch.device) -> torch.Tensor:
        """Complex (N, Dh/2): cached, or in training with augmentations one fresh draw per forward,
        made at block 0 and reused by the later blocks (DINOv3 builds its rope once per forward)."""
        grid = tuple(grid)
        if self.training and self.augments:
            if block == 0 or self._draw is None or self._draw[0] != grid:
                self._draw = (grid, dinov3_rotation(self.augment(self.coords(grid, device)), self.periods.float()))
            return self._draw[1]
        build = self.build_rotation
        return self._tables.get(lambda: build(grid, block, device), grid, device, "rotation", self.strategy)

    def build_rotation(self, grid: Grid, block: int, device: torch.device) -> torch.Tensor:
        """The rotations without augmentation (the same for every block), built afresh."""
        return dinov3_rotation(self.coords(grid, device), self.periods.float().to(device))

    def rotate_qk(self, q, k, grid, block):
        rot = self.rotation(grid, block, q.device)  # (N, Dh/2)
        return fn.on_grid_tokens(q, k, self.num_prefix_tokens, lambda x: fn.apply_rotary(x, rot, "half"))

    def extra_repr(self) -> str:
        periods = f"base={self.base}" if self.min_period is None else f"periods={self.min_period}..{self.max_period}"
        augs = [f"{n}={getattr(self, n)}" for n in AUGMENTS if getattr(self, n) is not None] or ["no augmentation"]
        return f"{super().extra_repr()}, {periods}, normalize_coords={self.normalize_coords}, {', '.join(augs)}"
