"""A trained image model as a graph with dynamic sizes, checked against the eager model.

:func:`export_model` traces the model with ``torch.export.export`` and, for ONNX, converts the
traced program with ``torch.onnx.export(..., dynamo=True)``. It tries, in order (:data:`RANGES`):

1. any size: batch, height and width all dynamic (each side a multiple of the patch, at least two
   patches: ``torch.export`` specializes a side of one);
2. from the training size up: the same, each side at least the training side (an encoding whose
   code takes another path on smaller grids, such as an antialiased table resize, fits here);
3. a fixed size: the training size, only the batch dynamic.

The first whose graph runs at every size it claims, agrees with the eager model there (within
:data:`TOLERANCE`) and refuses a size the patch does not divide (as the eager model does) is kept;
the reasons the broader ones failed are kept with it. ``torch.export`` can accept a dynamic size
and still fix it inside the graph (a shape guard, a constant folded from one size), so the check at
other sizes, not the trace, decides.

An ONNX graph is never given a broader range than its trace's guards allow. The conversion drops
the guards, so where a guard refuses a size (a model that takes a Python branch on the grid) the
ONNX graph silently runs the branch that was traced. The logits of a small untrained model hardly
depend on the position encoding (4.5e-7 between ``rope_2d``'s ``ntk`` and ``extrapolate`` at 16x32
in bench/export.py's model), so the comparison with the eager model alone would not see it
(tests/test_export.py shows it on a model with such a branch).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.export import Dim

from .onnx_ops import onnx_decompositions, rewrite_for_onnx

FORMATS = ("onnx", "torch_export")
#: the largest |exported - eager| a graph may show (float32 logits)
TOLERANCE = 1e-4
#: the size ranges tried, broadest first
RANGES = ("any size", "from the training size up", "fixed size")
MIN_PATCHES = 2  # torch.export specializes a dimension of size 0 or 1


class ExportFailed(RuntimeError):
    """No range gave a graph that agrees with the eager model; the message lists every reason."""


@dataclass(frozen=True)
class Geometry:
    """What the shapes of an image model's input are: channels, patch (h, w), training size (h, w)."""

    channels: int
    patch: tuple[int, int]
    train: tuple[int, int]

    def lowest(self, scope: str) -> tuple[int, int] | None:
        """The smallest (h, w) in pixels a range allows; None for the fixed size."""
        if scope == "any size":
            return MIN_PATCHES * self.patch[0], MIN_PATCHES * self.patch[1]
        return self.train if scope == "from the training size up" else None

    def check_sizes(self, scope: str) -> list[tuple[int, int]]:
        """Where a graph of this range is checked: the training size, a non-square size (twice as
        wide), and a smaller one (half the sides, at least two patches) or, where the range starts
        at the training size, a larger square one; a fixed size at two batch sizes."""
        (h, w), (ph, pw) = self.train, self.patch
        if scope == "fixed size":
            return [self.train, self.train]  # batches of 2 and 3: the batch stays dynamic
        smaller = (max(h // 2 // ph, MIN_PATCHES) * ph, max(w // 2 // pw, MIN_PATCHES) * pw)
        third = smaller if scope == "any size" and smaller != self.train else (2 * h, 2 * w)
        return [self.train, (h, 2 * w), third]

    def off_patch(self) -> tuple[int, int] | None:
        """A size the patch does not divide (the training size plus a pixel on each side the patch
        spans more than one pixel of), which every graph must refuse; None for a patch of 1x1."""
        (h, w), (ph, pw) = self.train, self.patch
        return None if (ph, pw) == (1, 1) else (h + (ph > 1), w + (pw > 1))

    def example(self, batch: int = 2, size: tuple[int, int] | None = None, seed: int = 0) -> torch.Tensor:
        """A seeded batch of normal noise images: what every check feeds both graphs."""
        h, w = size or self.train
        return torch.randn(batch, self.channels, h, w, generator=torch.Generator().manual_seed(seed))


def geometry_of(model: nn.Module, train: tuple[int, int]) -> Geometry:
    """The input geometry from the model's patch embedding (its first ``Conv2d``: channels, stride)."""
    conv = next((m for m in model.modules() if isinstance(m, nn.Conv2d)), None)
    if conv is None:
        raise ValueError("the model has no Conv2d patch embedding to read the channels and patch size from")
    return Geometry(conv.in_channels, tuple(conv.stride), tuple(train))


def dynamic_shapes(geo: Geometry, scope: str) -> dict:
    """``torch.export``'s ``dynamic_shapes`` for the input ``images`` (B, C, H, W) of one range: the
    sides as multiples of the patch (derived dimensions), so the patch grid stays an integer."""
    spec = {0: Dim("batch", min=1)}
    low = geo.lowest(scope)
    if low is not None:
        rows = Dim("rows", min=low[0] // geo.patch[0])
        cols = Dim("cols", min=low[1] // geo.patch[1])
        spec.update({2: geo.patch[0] * rows, 3: geo.patch[1] * cols})
    return {"images": spec}


class _Images(nn.Module):
    """The model with its input named ``images`` (``dynamic_shapes`` and the ONNX input name), the
    images cut into patches and joined again before it: the identity at every size the patch
    divides, a reshape that fails at any other size, in every runtime.

    The model's own refusal of such a size (``VisionTransformer.grid_for``) does not survive the
    trace: the dynamic sides are multiples of the patch by construction (:func:`dynamic_shapes`), so
    the check is true and dropped, and an ONNX graph checks no input shape. Without this reshape,
    a patch-4 graph ran a 30x30 image as its top-left 28x28 crop (the convolution's stride skips the
    rest) and returned logits where PyTorch refuses the size."""

    def __init__(self, model: nn.Module, patch: tuple[int, int]):
        super().__init__()
        self.model, self.patch = model, patch

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        b, c, h, w = images.shape
        (ph, pw) = self.patch
        patches = images.reshape(b, c, h // ph, ph, w // pw, pw)  # fails unless ph divides h and pw divides w
        return self.model(patches.reshape(b, c, h, w))


def trace(model: nn.Module, geo: Geometry, scope: str) -> torch.export.ExportedProgram:
    """``torch.export.export`` of ``model`` (in eval mode) for the range ``scope``."""
    wrapped = _Images(model.eval(), geo.patch)
    return torch.export.export(wrapped, (geo.example(),), dynamic_shapes=dynamic_shapes(geo, scope))


def to_onnx(program: torch.export.ExportedProgram) -> bytes:
    """The ONNX model (serialized) of a traced program: the operations ONNX lacks rewritten
    (:func:`vitpos.export.onnx_ops.rewrite_for_onnx`), then the dynamo exporter, quietly.

    Where the exporter fails on a program that needed no rewrite, it is tried once more after
    PyTorch's default decompositions: the exporter decomposes with size-oblivious reasoning, under
    which it cannot prove some reshapes of a dynamic batch to be views (the models with the gathered
    bias tables of ``rel_bias_2d`` and ``fire_2d``); decomposed first with ordinary reasoning, they
    convert."""
    rewritten = rewrite_for_onnx(program)
    try:
        return convert(rewritten)
    except torch.onnx.OnnxExporterError:
        if rewritten is not program:  # the default decompositions already ran with the rewrites
            raise
    return convert(program.run_decompositions(onnx_decompositions()))


def convert(program: torch.export.ExportedProgram) -> bytes:
    """``torch.onnx.export(..., dynamo=True)`` of ``program``, serialized, without its narration."""
    # optimize=False: onnxscript's optimizer (0.7) drops a subtraction of a small constant as if it were
    # zero (LookHere's 1e-9 slack on its field of view, flipping boundary rays); onnxruntime optimizes
    # the graph itself when it loads it
    with contextlib.redirect_stdout(io.StringIO()):  # the exporter narrates its steps
        onnx_program = torch.onnx.export(
            program, dynamo=True, input_names=["images"], output_names=["logits"], verbose=False, optimize=False
        )
    return onnx_program.model_proto.SerializeToString()


def ort_session(model: bytes, threads: int | None = None):
    """An onnxruntime CPU session of a serialized ONNX model (``threads``: intra-op threads)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only
    if threads is not None:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def runner(fmt: str, artifact) -> Callable[[torch.Tensor], np.ndarray]:
    """A function images -> logits (numpy) running the exported graph."""
    if fmt == "onnx":
        import onnxruntime as ort

        session = ort_session(artifact, threads=torch.get_num_threads())
        quiet = ort.RunOptions()
        quiet.log_severity_level = 4  # a run that fails raises its error, which onnxruntime would also print
        return lambda images: session.run(None, {"images": images.numpy()}, quiet)[0]
    module = artifact.module()
    return lambda images: module(images).detach().numpy()


def first_line(err: BaseException) -> str:
    """An error as one short line: its type and the first line of its message."""
    text = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
    return f"{type(err).__name__}: {text[:240]}" if text else type(err).__name__


@dataclass
class Exported:
    """One exported graph: its format and range, why broader ranges failed, and the largest
    |exported - eager| of the logits at every size it was checked at."""

    format: str
    scope: str
    artifact: object  # ExportedProgram (torch_export) or the serialized ONNX model (bytes)
    diffs: dict[tuple[int, int], float]
    reasons: list[str] = field(default_factory=list)

    @property
    def dynamic(self) -> bool:
        return self.scope != "fixed size"


def check(model: nn.Module, run, geo: Geometry, scope: str) -> dict[tuple[int, int], float]:
    """The largest |run(x) - model(x)| at every size of the range; a size where the graph fails or
    disagrees raises ``ValueError`` naming it, and so does a graph that runs at a size the patch
    does not divide (:meth:`Geometry.off_patch`), which the eager model refuses."""
    diffs = {}
    for i, size in enumerate(geo.check_sizes(scope)):
        images = geo.example(batch=2 if i == 0 else 3, size=size, seed=i + 1)
        with torch.no_grad():
            expected = model(images).numpy()
        name = f"{size[0]}x{size[1]}"
        try:
            got = run(images)
        except Exception as err:  # noqa: BLE001 (a graph that refuses a size: the reason is the message)
            raise ValueError(f"at {name} the graph fails ({first_line(err)})") from None
        diff = float(np.abs(got - expected).max())
        if not diff <= TOLERANCE:  # also NaN
            raise ValueError(f"at {name} the graph differs from the eager model by {diff:.2g}")
        diffs[size] = max(diff, diffs.get(size, 0.0))
    odd = geo.off_patch()
    if odd is not None:
        try:
            run(geo.example(size=odd))
        except Exception:  # noqa: BLE001, S110 (the refusal asked for; its wording is the runtime's)
            pass
        else:
            raise ValueError(f"at {odd[0]}x{odd[1]} the graph runs although the patch does not divide that size")
    return diffs


def export_model(model: nn.Module, geo: Geometry, fmt: str, traces: dict | None = None) -> Exported:
    """The broadest range of :data:`RANGES` whose ``fmt`` graph agrees with ``model`` (see the
    module docstring); :class:`ExportFailed` listing each range's reason when none does.

    ``traces``: a dict to keep each range's ``torch.export`` program in, so that exporting the same
    model to the other format does not trace it again."""
    model.eval()
    traces = {} if traces is None else traces
    reasons = []
    for scope in RANGES:
        try:
            if scope not in traces:
                traces[scope] = trace(model, geo, scope)
            program = traces[scope]
            if fmt == "onnx":  # ONNX drops the trace's shape guards: where they refuse a size, the graph would
                check(model, runner("torch_export", program), geo, scope)  # run the branch traced, unchecked
            artifact = to_onnx(program) if fmt == "onnx" else program
            diffs = check(model, runner(fmt, artifact), geo, scope)
        except Exception as err:  # noqa: BLE001 (each range's failure is a reason to try the next)
            reasons.append(f"{scope}: {err if isinstance(err, ValueError) else first_line(err)}")
            continue
        return Exported(fmt, scope, artifact, diffs, reasons)
    raise ExportFailed("no graph agrees with the eager model: " + "; ".join(reasons))
