"""How every RoPE of :mod:`rope` meets a grid it was not trained on: its strategies.

Shared by 1D and 2D; on images each axis is scaled on its own, s = new / trained
size of that axis:

- ``extrapolate``: integer positions past the trained range (RoPE-ViT's eval);
- ``interpolate`` (alias ``linear``): position interpolation (Chen et al. 2023);
- ``ntk``: NTK-aware base scaling base * s^(d/(d-2)) (bloc97 2023);
- ``dynamic``: NTK with s = max(1, n / n_train), i.e. plain RoPE up to the
  training length (Emozilla 2023, HF ``dynamic``);
- ``yarn``: per-frequency ramp between interpolation and extrapolation, with
  every logit multiplied by (0.1 ln s + 1)^2 (Peng et al. 2023). The ramp
  (``yarn_ramp``) is by default the authors' released code and HF's
  ``_compute_yarn_parameters`` (``index``: linear over the pair index), or the
  paper's equations (``turns``: linear in the turns per training length).

``scale`` fixes s for ``interpolate``/``ntk``/``yarn``; by default s is the
ratio of the current grid to the training grid, and s <= 1 leaves NTK and
YaRN as plain RoPE. ``align`` sets how ``interpolate`` maps image axes (see
:func:`vitpos.encodings.functional.axis_positions`).

The YaRN factor multiplies q and k of *every* token, prefix tokens included,
so all logits share one temperature: on the grid tokens it rides in the cached
rotation's magnitude, on the (unrotated) prefix tokens it is a plain multiply.
"""

from __future__ import annotations

import math

import torch

from . import functional as fn
from .base import Grid, OptionError, check_choice, check_positive
from .symbolic_sizes import scales, size_ratio

ROPE_STRATEGIES = ("extrapolate", "interpolate", "ntk", "dynamic", "yarn")


class RopeScaling:
    """The strategies above, mixed into the RoPE classes. Reads the encoding's ``strategy``,
    ``train_grid``, ``base`` and ``rot_axes`` (how many grid axes the frequencies are split over)."""

    def init_scaling(self, scale, beta_fast: float, beta_slow: float, yarn_ramp: str, align: str) -> None:
        """Check and keep the strategies' options (see the module docstring)."""
        check_positive("scale", scale, "null: new size / training size", allow_none=True)
        if yarn_ramp not in fn.YARN_RAMPS:
            raise OptionError(
                "yarn_ramp",
                f"unknown yarn_ramp '{yarn_ramp}'; valid: index (the authors' code and HF, default), "
                "turns (the paper's equations); set encoding.yarn_ramp=...",
            )
        check_positive("beta_slow", beta_slow, "e.g. the default, 1")
        check_positive("beta_fast", beta_fast, "e.g. the default, 32")
        if beta_fast <= beta_slow:
            raise OptionError(
                "beta_fast",
                f"encoding.beta_fast ({beta_fast}) must be above encoding.beta_slow ({beta_slow}) "
                "(the defaults are 32 and 1)",
            )
        self.scale, self.beta_fast, self.beta_slow, self.yarn_ramp = scale, beta_fast, beta_slow, yarn_ramp
        self.align = check_choice(self.name, "align", align, fn.ALIGN_MODES)

    def axis_scale(self, n: int, n_train: int) -> float | torch.Tensor:
        """s for NTK/YaRN: the fixed ``scale`` if set (not for ``dynamic``), else
        the length ratio, never below 1 (shorter grids need no scaling; a 0-d tensor
        where ``n`` is symbolic: :func:`~vitpos.encodings.symbolic_sizes.size_ratio`)."""
        if self.scale is not None and self.strategy != "dynamic":
            return float(self.scale)
        return size_ratio(n, n_train)

    def axis_angles(self, n: int, n_train: int, inv_freq: torch.Tensor, image: bool) -> torch.Tensor:
        """Angles (n, len(inv_freq)) in float32 along one axis."""
        strategy = self.strategy
        # s only where a strategy reads it: extrapolate compares no sizes, so torch.export keeps n symbolic
        pos = torch.arange(n, dtype=torch.float32)
        if strategy == "interpolate" and self.scale is None:
            pos = fn.axis_positions(n, n_train, True, image, self.align)
        elif strategy == "interpolate":
            pos = pos / self.axis_scale(n, n_train)
        elif strategy in ("ntk", "dynamic") and scales(s := self.axis_scale(n, n_train)):
            d = 2 * len(inv_freq)  # width rotated along this axis
            exponent = torch.arange(len(inv_freq), dtype=torch.float32) * 2 / d  # 2i/d
            inv_freq = inv_freq * (self.base / fn.ntk_base(self.base, s, d)) ** exponent  # == base'^(-2i/d)
        elif strategy == "yarn":
            s = self.axis_scale(n, n_train)
            inv_freq = fn.yarn_inv_freq(inv_freq, s, n_train, self.beta_fast, self.beta_slow, self.yarn_ramp, self.base)
        return torch.outer(pos, inv_freq)

    def qk_magnitude(self, grid: Grid) -> float:
        """The multiplier of q and k of every token: YaRN's 0.1 ln s + 1 (so
        logits scale by its square), the geometric mean over the axes of 2D
        RoPE; 1 for every other strategy."""
        if self.strategy != "yarn":
            return 1.0
        if self.rot_axes == 1:
            return fn.yarn_attention_factor(self.axis_scale(math.prod(grid), math.prod(self.train_grid)))
        factors = [fn.yarn_attention_factor(self.axis_scale(n, nt)) for n, nt in zip(grid, self.train_grid)]
        return math.prod(factors) ** (1 / len(factors))
