"""The one cache of grid-derived tables every encoding keeps (rotations, fixed tables, index maps)."""

from __future__ import annotations

import torch
from torch import nn

Grid = tuple[int, ...]


class GridCache:
    """Derived tables (rotations, fixed tables, index maps) built on first use per key, then reused.

    A key is the grid and the device (and the dtype, for a table built in it), then whatever else the
    table depends on (the strategy, ...); devices and dtypes are keyed as strings, because dynamo
    guards on the key and cannot rebuild a dtype. At most ``max_size`` tables: a miss on a full cache
    empties it (evaluating size after size keeps memory bounded).

    Tables hold no gradient, and are built outside inference mode: a table first built during evaluation
    (Lightning validates under ``torch.inference_mode``) would otherwise be an inference tensor, which a
    later training step cannot save for its backward pass.

    Tables made from trained parameters (ComRoPE, LieRE) pass the parameters' ``version``: a new one
    (an optimizer step, ``load_state_dict``) empties the cache; and while parameters train
    (:meth:`parameters_train`) they are built afresh at every call instead of cached.
    """

    def __init__(self, max_size: int = 16):
        self.max_size = max_size
        self._tables: dict[tuple, object] = {}
        self._version: tuple | None = None

    @staticmethod
    def parameters_train() -> bool:
        """Whether a table of trained parameters must be built afresh (differentiable, inside the
        compiled graph) rather than cached: with gradients enabled, or while compiling."""
        return torch.is_grad_enabled() or torch.compiler.is_compiling()

    @staticmethod
    def version_of(module: nn.Module) -> tuple:
        """The state of ``module``'s parameters: storage and in-place update count of each."""
        return tuple((p.data_ptr(), p._version) for p in module.parameters())

    def get(self, build, grid: Grid, device, *more, dtype: torch.dtype | None = None, version: tuple | None = None):
        """The table of (``grid``, ``device``, ``*more``, ``dtype``), built by ``build()`` on a miss.

        While ``torch.export`` traces (also under ``torch.onnx.export(dynamo=True)``) nothing is cached:
        the grid may be symbolic (a SymInt is not hashable), and the table must be traced into the
        graph as operations on the input's size, not frozen as a constant of one size."""
        if torch.compiler.is_exporting():
            return build()
        if version != self._version:  # the parameters changed: every table is stale
            self._tables.clear()
            self._version = version
        key = (tuple(grid), str(device), *more) + (() if dtype is None else (str(dtype),))
        table = self._tables.get(key)
        if table is None:
            if len(self._tables) >= self.max_size:
                self._tables.clear()
            with torch.inference_mode(False), torch.no_grad():
                table = build()
            self._tables[key] = table
        return table
