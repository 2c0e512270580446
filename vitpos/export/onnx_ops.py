"""The three operations some encodings use that ONNX has no operator for, written in ones it has.

``torch.onnx.export`` translates each ATen operation of an exported program into ONNX operators;
three that encodings here need have no translation (onnxscript 0.7): ``hypot`` (LookHere's field
of view), a linear solve (STRING-Cayley's (I + S)^-1 (I - S)) and the matrix exponential (ComRoPE,
LieRE). :func:`onnx_decompositions` rewrites them, in the exported program, into matrix products
and elementwise operations before the conversion; the eager model and ``torch.export`` keep the
ATen operations. Each rewrite is checked against the operation it replaces in
``tests/test_export.py``, and every exported graph against the eager model (``vitpos.export.graph``).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

#: Taylor degree and norm bound of :func:`matrix_exp`: the series' remainder on ||X|| <= 1/2 is
#: below 0.5^15 / 15! (1e-17), far under float32 rounding
TAYLOR_DEGREE, TAYLOR_NORM = 14, 0.5
#: squarings :func:`matrix_exp` can undo: matrices of 1-norm up to 0.5 * 2^30 (5e8)
MAX_SQUARINGS = 30


def hypot(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """sqrt(x^2 + y^2) (ATen's hypot also avoids overflow past 1e19, which positions never reach)."""
    return torch.sqrt(x * x + y * y)


def solve(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """X with A X = B for (..., n, n) A and (..., n, k) B, by Gauss-Jordan elimination without
    pivoting, unrolled over the static n.

    No pivoting is safe for the matrices it meets, I + S with S skew-symmetric: their symmetric
    part is I, positive definite, so every pivot is at least 1 (and no row swap is needed)."""
    n = a.shape[-1]
    m = torch.cat([a, b], -1)  # (..., n, n + k): the augmented matrix
    eye = torch.eye(n, dtype=a.dtype, device=a.device)
    for i in range(n):
        row = m[..., i : i + 1, :] / m[..., i : i + 1, i : i + 1]  # (..., 1, n + k): pivot row, pivot 1
        # every other row loses its column-i multiple of the pivot row; row i becomes the pivot row
        m = m - (m[..., :, i : i + 1] - eye[:, i : i + 1]) * row
    return m[..., :, n:]


def solve_ex(a: torch.Tensor, b: torch.Tensor, *, left: bool = True, check_errors: bool = False):
    """``aten._linalg_solve_ex``: (X, LU, pivots, info); only X is read in an inference graph."""
    if not left:  # X A = B: transpose both sides
        x = solve(a.transpose(-2, -1), b.transpose(-2, -1)).transpose(-2, -1)
    else:
        x = solve(a, b)
    pivots = torch.zeros(a.shape[:-1], dtype=torch.int32, device=a.device)
    return x, a, pivots, torch.zeros(a.shape[:-2], dtype=torch.int32, device=a.device)


def matrix_exp(a: torch.Tensor) -> torch.Tensor:
    """exp(A) of (..., n, n) matrices by scaling and squaring: X = A / 2^s with ||X||_1 <= 1/2, a
    Taylor polynomial of X (Horner form), then s squarings, s chosen per matrix from its norm.

    ONNX has no loop here that depends on a value, so the squarings are :data:`MAX_SQUARINGS`
    matrix products, each kept only where s calls for it. The matrices are flattened to one batch
    axis first, so that every product is a single ``bmm`` and each squaring's mask is one index into
    a table built once: fewer nodes than broadcasting ``@``, and the conversion's time grows with
    the node count (docs/export.md)."""
    n = a.shape[-1]
    x = a.reshape(-1, n, n)  # (B, n, n): every leading axis in one batch axis
    norm = x.abs().sum(-2).amax(-1)  # (B,): the 1-norm of each matrix
    s = torch.ceil(torch.log2(norm / TAYLOR_NORM)).clamp(0, MAX_SQUARINGS)  # (B,) float
    x = x / torch.exp2(s)[:, None, None]
    eye = torch.eye(n, dtype=a.dtype, device=a.device)
    p = eye + x / TAYLOR_DEGREE
    for k in range(TAYLOR_DEGREE - 1, 0, -1):
        p = eye + torch.bmm(x, p) / k  # Horner: I + X/1 (I + X/2 (I + ...))
    steps = torch.arange(MAX_SQUARINGS, dtype=s.dtype, device=a.device)
    squares = (s > steps[:, None])[:, :, None, None]  # (MAX_SQUARINGS, B, 1, 1): squaring i applies to matrix b
    for i in range(MAX_SQUARINGS):
        p = torch.where(squares[i], torch.bmm(p, p), p)
    return p.reshape(a.shape)


#: the ATen operations ONNX has no translation for, and their rewrites above
REWRITES = {
    aten.hypot.default: hypot,
    aten.linalg_solve.default: lambda a, b, *, left=True: solve_ex(a, b, left=left)[0],
    aten._linalg_solve_ex.default: solve_ex,
    aten.linalg_matrix_exp.default: matrix_exp,
}


def onnx_decompositions() -> dict:
    """The decomposition table for :meth:`torch.export.ExportedProgram.run_decompositions`: PyTorch's
    default table plus the rewrites above."""
    table = torch.export.default_decompositions()
    table.update(REWRITES)
    return table


def uses_rewritten_ops(program: torch.export.ExportedProgram) -> bool:
    """Whether any graph of ``program`` calls an operation of :data:`REWRITES`."""
    graphs = (m.graph for m in program.graph_module.modules() if isinstance(m, torch.fx.GraphModule))
    return any(node.target in REWRITES for graph in graphs for node in graph.nodes)


def rewrite_for_onnx(program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """``program`` with the operations of :data:`REWRITES` rewritten (:func:`onnx_decompositions`);
    unchanged, without a new trace, where it uses none of them.

    Each ``run_decompositions`` traces the whole program again, and ``torch.onnx.export`` runs its
    own right after; the rewrite pass is only worth its trace where a program calls one of these
    operations (the time it saves: docs/performance.md)."""
    return program.run_decompositions(onnx_decompositions()) if uses_rewritten_ops(program) else program
