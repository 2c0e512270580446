"""Trained image models as ONNX graphs or ``torch.export`` programs with dynamic sizes.

- :mod:`vitpos.export.graph`: :func:`export_model` traces a model for the broadest size range
  whose graph agrees with the eager model (any size, from the training size up, or fixed);
- :mod:`vitpos.export.onnx_ops`: the operations ONNX lacks (hypot, a linear solve, the matrix
  exponential), rewritten before the ONNX conversion;
- :mod:`vitpos.export.cli`: ``python -m vitpos.export ckpt=... out=model.onnx``.

docs/export.md has the command and the table of every image encoding.
"""

from vitpos.export.graph import FORMATS, RANGES, TOLERANCE, Exported, ExportFailed, Geometry, export_model, geometry_of

__all__ = ["FORMATS", "RANGES", "TOLERANCE", "ExportFailed", "Exported", "Geometry", "export_model", "geometry_of"]
