"""Size helpers that keep a grid's sizes symbolic, so an encoding exports for every size.

Under ``torch.export`` (and ONNX) with dynamic sizes a side of the grid is a
symbolic integer, not an ``int``: a Python comparison on it (``n == n_train``,
``n > n_train``) or an operation that wants a plain int (``torch.linspace``)
fixes the exported graph to the size it was traced at. Each helper here gives
the eager result for integer sizes and, for symbolic ones, a form that is
traced for every size (a tensor, or the formula instead of a shortcut).
Eager outputs do not change. Which encoding needed which: docs/export.md,
"What was changed so that they export". The math itself lives in
:mod:`vitpos.encodings.functional`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def is_size(n, size: int) -> bool:
    """Whether the size ``n`` is ``size``; False when ``n`` is symbolic (``torch.export`` with dynamic
    sizes), so a resize that is skipped when nothing changes is traced instead (the identity at that size)."""
    return isinstance(n, int) and n == size


def shrinks(new: tuple, old: tuple[int, ...]) -> bool | torch.Tensor:
    """Whether the grid ``new`` is smaller than ``old`` along some axis: a bool for integer sizes; for
    symbolic ones (``torch.export`` with dynamic sizes) a 0-d bool tensor, so that a choice made on it
    (:func:`resize_bicubic`'s antialiasing) is traced for every size instead of fixed by a guard."""
    if all(isinstance(n, int) for n in new):
        return any(n < m for n, m in zip(new, old))
    return torch.stack([torch.zeros(()) + n < m for n, m in zip(new, old)]).any()


def resize_bicubic(x: torch.Tensor, size: tuple, antialias: bool | torch.Tensor) -> torch.Tensor:
    """``F.interpolate(x, size, mode="bicubic", align_corners=False, antialias=...)``; where
    ``antialias`` is a 0-d bool tensor (:func:`shrinks` of symbolic sizes), both resizes, selected by it."""
    if isinstance(antialias, torch.Tensor):
        return torch.where(antialias.to(x.device), resize_bicubic(x, size, True), resize_bicubic(x, size, False))
    return F.interpolate(x, size=size, mode="bicubic", align_corners=False, antialias=antialias)


def size_ratio(n, n_train: int) -> float | torch.Tensor:
    """s = max(1, n / n_train), the scale of NTK and YaRN: a float for an integer size; for a
    symbolic ``n`` (``torch.export`` with dynamic sizes) a 0-d float32 tensor, so that the scaling
    strategies trace their formula, which is plain RoPE at s = 1, instead of a Python branch on the size."""
    if isinstance(n, int):
        return max(1.0, n / n_train)
    return (torch.zeros(()) + n / n_train).clamp(min=1.0)


def scales(s: float | torch.Tensor) -> bool:
    """Whether a scale from :func:`size_ratio` (or a fixed one) changes anything: above 1, or
    symbolic (a tensor, whose formula is traced for every size)."""
    return isinstance(s, torch.Tensor) or s > 1.0


def linspace(start: float, end, steps) -> torch.Tensor:
    """``torch.linspace(start, end, steps)`` in float32; when ``steps`` is symbolic (``torch.export`` with
    dynamic sizes, where linspace would fix it to the traced value) start + i (end - start) / (steps - 1),
    the same values up to float32 rounding."""
    if isinstance(steps, int):
        return torch.linspace(start, end, steps)
    return start + torch.arange(steps, dtype=torch.float32) * ((end - start) / torch.sym_max(steps - 1, 1))
