"""How much memory one evaluation at a given size needs, and how much of it may be planned.

The one estimate and the one rule behind both places that refuse a size up front: the config
check (``vitpos.validate``, before a run trains, for the training size and every ``eval`` size)
and ``python -m vitpos.extrapolate`` (before a checkpoint is evaluated). Both print the same
message, which names the option to change.

Estimate (:func:`evaluation_memory`), for one eval batch of ``B`` items of ``N`` tokens, width
``D`` and ``H`` heads, all float32: the attention logits, their softmax and an additive bias
(3 copies of ``B x H x N x N``), the activations of one block (``8 x B x N x D``: the residual,
q, k, v, the MLP's hidden width and their outputs) and the test inputs (images: the test set
resized to that size and one intermediate copy; sequences: the token ids). Attention dominates:
it grows with ``N^2``, i.e. with the fourth power of an image's side. An image of ``h x w`` pixels
(``data.img_size``, ``eval.resolutions``: a side or an ``[h, w]`` pair) has
``(h // patch) * (w // patch)`` tokens.

Rule (in :func:`memory_problem`): an evaluation may plan to use :data:`MEMORY_FRACTION` of the
memory free now on its device (:func:`vitpos.runtime.available_memory`: on the CPU, the least of
the machine's available RAM, what ``ulimit -v`` and the cgroup limit leave this process). The
rest is headroom for the model, the allocator and what the estimate leaves out.

torch is imported by nothing here: the config check calls this before torch loads.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from vitpos.errors import UserError
from vitpos.runtime import available_memory, uses_cuda
from vitpos.sizes import as_hw, size_name, token_grid

#: of the memory free now on the device, the part one evaluation may plan to use
MEMORY_FRACTION = 0.8
FLOAT32 = 4
GIB = 2**30


@dataclass(frozen=True)
class EvaluationMemory:
    """What one evaluation at ``size`` needs, in bytes; ``scaled`` (attention and activations)
    grows with the batch, ``inputs`` (the test data at that size) does not. ``size``: as the
    messages name it (``48``, ``16x32`` or a sequence length)."""

    size: str
    tokens: int
    batch: int
    scaled: int
    inputs: int

    @property
    def total(self) -> int:
        return self.scaled + self.inputs

    def batch_that_fits(self, allowed: float) -> int:
        """The largest eval batch whose estimate fits in ``allowed`` bytes (0: none does)."""
        per_item = self.scaled / self.batch
        return int((allowed - self.inputs) // per_item) if allowed > self.inputs else 0


def evaluation_memory(cfg: Mapping, kind: str, size, num_test: int | None) -> EvaluationMemory:
    """The estimate (module docstring) for the run config ``cfg`` (a dict or an OmegaConf config)
    evaluated at ``size`` (``kind``: ``"res"``, image pixels, a side or ``[h, w]``; ``"len"``,
    sequence tokens) on ``num_test`` test items (None: not known yet, counted as one batch)."""
    model, data = cfg["model"], cfg["data"]
    model = {**model, **(model.get("geometry") or {})}  # a timm model's, saved by its task (model=timm)
    batch = int(data.get("eval_batch_size") or data.get("batch_size") or 1)
    batch = min(batch, max(num_test, 1)) if num_test is not None else batch
    items = batch if num_test is None else num_test
    if kind == "res":
        (h, w), patch = as_hw(size), int(model["patch_size"])
        prefix = int(model.get("num_prefix_tokens", model.get("pool") == "cls"))  # class (and register) tokens
        tokens = math.prod(token_grid((h, w), patch)) + prefix
        inputs = 2 * items * 3 * h * w * FLOAT32  # the resized copy and one intermediate
        name = size_name((h, w))
    else:
        tokens, inputs, name = size, items * size * 8, str(size)  # int64 token ids
    attention = 3 * batch * int(model["num_heads"]) * tokens * tokens * FLOAT32  # logits, softmax, bias
    activations = 8 * batch * tokens * int(model["dim"]) * FLOAT32
    return EvaluationMemory(name, tokens, batch, attention + activations, inputs)


def memory_problem(
    cfg: Mapping, kind: str, sizes: Iterable[tuple[str, object]], num_test: int | None, device: str = "cpu"
) -> UserError | None:
    """The refusal of the first ``(option, size)`` whose evaluation does not fit on ``device``, or
    None when all fit. Returned, not raised: the config check raises it, the extrapolation tool
    records it as the reason one checkpoint is skipped."""
    free = available_memory(device)
    allowed = MEMORY_FRACTION * free
    for option, size in sizes:
        need = evaluation_memory(cfg, kind, size, num_test)
        if need.total <= allowed:
            continue
        fit = need.batch_that_fits(allowed)
        fix = f"data.eval_batch_size={fit} would fit" if fit else "no data.eval_batch_size fits"
        where = "for this process (RAM, ulimit -v, cgroup limit)" if str(device) == "cpu" else f"on {device}"
        return UserError(
            option,
            f"{need.size} is refused: at {need.tokens} tokens an evaluation needs about {need.total / GIB:,.1f} GiB "
            f"(attention of a batch of {need.batch}, data.eval_batch_size), more than {MEMORY_FRACTION:.0%} "
            f"of the {free / GIB:,.1f} GiB free {where}",
            f"use smaller sizes; {fix}",
        )
    return None


def run_memory_problem(cfg: Mapping, kind: str, num_test: int | None) -> UserError | None:
    """:func:`memory_problem` for a run about to train, on the CPU: its test at the training size
    (``data.img_size`` / ``data.train_len``) and every ``eval.resolutions`` / ``eval.lengths`` size.
    ``num_test``: the test images counted on disk (None: not known yet); a ``data.test_subset``
    lowers it, and sequence runs test ``data.num_length_test`` sequences per length."""
    data, evaluation = cfg["data"], cfg.get("eval") or {}
    if kind == "res":
        train, extra = ("data.img_size", data["img_size"]), ("eval.resolutions", evaluation.get("resolutions"))
        known = [n for n in (num_test, data.get("test_subset")) if n]
        num_test = min(known) if known else None
    else:
        train, extra = ("data.train_len", data["train_len"]), ("eval.lengths", evaluation.get("lengths"))
        num_test = int(data["num_length_test"])
    sizes = [train, *((extra[0], size) for size in extra[1] or [])]
    return memory_problem(cfg, kind, sizes, num_test)


def training_memory_problem(cfg: Mapping, params: int) -> UserError | None:
    """The refusal of a network of ``params`` parameters whose training state does not fit in the memory free
    now, before it is built: weights, gradients and AdamW's two moments at 4 bytes each, and the EMA copy, on
    the CPU; the weights alone where a GPU trains (they are built on the CPU first). None when it fits."""
    gpu = uses_cuda(cfg["trainer"]["accelerator"])
    per_param = FLOAT32 if gpu else 4 * FLOAT32 + FLOAT32 * bool((cfg.get("task") or {}).get("ema_decay"))
    need, free = params * per_param, available_memory()
    if need <= MEMORY_FRACTION * free:
        return None
    return UserError(
        "model",
        f"{params:,} parameters need about {need / GIB:.1f} GiB to train here, more than "
        f"{MEMORY_FRACTION:.0%} of the {free / GIB:.1f} GiB free",
        "a smaller model.dim, model.depth, data.vocab_size or data.num_classes",
    )
