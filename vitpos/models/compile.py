"""``model.compile=true``: the training forward through ``torch.compile``.

Why a wrapper rather than a bare ``torch.compile(model)``: the encodings cache
their fixed tables per grid (sinusoidal tables, RoPE rotations, relative-bias
indices) in plain dicts. If dynamo traces the first call, the trace fills the
cache, the dict's contents change, and the next step fails its guards and
recompiles once. So at every new input shape the wrapper first runs the model
once eagerly on one sample (no grad, eval mode, the RNG state restored) to
fill those caches, then calls the compiled model, which then traces only
cache hits: one graph per shape, no recompile between steps.

Shapes are static (``dynamic=False``): a new image resolution or sequence
length compiles a new graph instead of a symbolic one, which keeps the grid a
plain Python tuple for the encodings.
"""

from __future__ import annotations

import torch
from torch import nn


class CompiledForward:
    """Callable ``model(x, *rest)`` through ``torch.compile(model, **options)``.

    Not an ``nn.Module``, so storing it on a LightningModule adds nothing to the
    checkpoint. ``options`` go to ``torch.compile`` (``backend``, ``mode``,
    ``fullgraph``); the default is inductor, ``fullgraph=True`` (every encoding
    compiles without a graph break), ``dynamic=False``.
    """

    def __init__(self, model: nn.Module, **options):
        options = {"fullgraph": True, "dynamic": False, **options}
        self.model = model
        self.compiled = torch.compile(model, **options)
        self.primed: set[tuple] = set()

    def prime(self, *args) -> None:
        """Fill the model's per-shape caches with one eager call on one sample."""
        key = tuple((tuple(a.shape[1:]), a.dtype, str(a.device)) for a in args if torch.is_tensor(a))
        if key in self.primed:
            return
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=[]):
                self.model(*(a[:1] if torch.is_tensor(a) else a for a in args))
        finally:
            self.model.train(was_training)
        self.primed.add(key)

    def __call__(self, *args):
        self.prime(*args)
        return self.compiled(*args)


def training_forward(model: nn.Module, compile: bool | dict = False):
    """The callable a task uses for its training forward: ``model`` itself, or a
    :class:`CompiledForward` when ``compile`` is true (or a dict of
    ``torch.compile`` options). Evaluation keeps the eager model under
    ``torch.inference_mode``: it visits many resolutions/lengths once each,
    where compiling every shape costs more than it saves."""
    if not compile:
        return model.__call__  # a bound method, not a module: nothing registered twice in the state dict
    return CompiledForward(model, **(compile if isinstance(compile, dict) else {}))
