"""Evaluation beyond the training size: image resolutions and sequence lengths.

One code path for both: for every strategy of the model's encoding and every
size, run the test set at that size (``datamodule.test_dataloader_at(size)``)
and record ``test/acc@res{R}`` (images) or ``test/acc@len{L}`` (sequences);
strategies other than the encoding's default get a ``/<strategy>`` suffix
(:func:`vitpos.metrics.metric_name` writes every name, :func:`vitpos.metrics.parse_metric` reads it).

Images above the data set's native resolution are *upsampled* copies (a larger
token grid, no new detail): their tags say so, ``test/acc@res{R}up``, so that
a table or plot never mixes them with sizes that carry real pixels (the
datamodule's ``resampling(size)``: native, downsampled or upsampled).

An image size is a side or an ``[h, w]`` pair (``eval.resolutions=[16,[16,32],[32,16],32]``):
a non-square one is tagged with both sides, height first, ``test/acc@res16x32``
(:func:`vitpos.sizes.size_name`; a square keeps ``test/acc@res16``). Each axis is resampled
from the native size on its own, and a size with either axis above native is ``upsampled``.

Standalone, on one or more checkpoints::

    python -m vitpos.extrapolate ckpt=runs/<group>/<model>/<label>-<hash>/seed0/checkpoints/last.ckpt \
        strategies=all resolutions=[16,24,32,40,48,64] out=extrapolation

prints a table and writes ``extrapolation.csv`` and ``extrapolation.png``.
"""

from __future__ import annotations

import itertools
import math
import sys
import time

import torch
from lightning.fabric.utilities.apply_func import move_data_to_device

from vitpos.metrics import metric_name
from vitpos.sizes import plain_size, size_name


def strategies_of(pe) -> list[str]:
    """Every strategy an encoding (or each part of a combination) offers,
    default first; ``error`` is left out since it refuses every new size."""
    parts = getattr(pe, "parts", [pe])
    names = []
    for p in parts:
        names += [s for s in type(p).strategies if s not in names and s != "error"]
    return names


def choose_strategies(pe, spec) -> list[str]:
    if spec in (None, "default"):
        return [pe.strategy]
    if spec == "all":  # every distinct setting (a combination's parts may ignore a name)
        chosen, seen = [], set()
        for s in [pe.strategy, *strategies_of(pe)]:
            with pe.using_strategy(s):
                if pe.strategy not in seen:
                    seen.add(pe.strategy)
                    chosen.append(s)
        return chosen
    return [str(s) for s in spec]


def resampling_of(datamodule, kind: str, size) -> str:
    """``native``, ``downsampled`` or ``upsampled`` for an image size (the datamodule knows its
    data's native resolution); ``native`` for sequence lengths (every length is generated)."""
    answer = getattr(datamodule, "resampling", None)
    return answer(size) if kind == "res" and answer is not None else "native"


def score_at(module, datamodule, size, device: torch.device, half, max_batches) -> tuple[float, int, int]:
    """(loss sum, correct, count) of ``module`` on the test set at ``size``, under autocast to ``half``
    (a dtype, or None for float32); a ``ValueError`` means the encoding refuses that size."""
    prepare = getattr(datamodule, "prepare_batch", None)
    loss_sum, correct, count = 0.0, 0, 0
    for batch in itertools.islice(datamodule.test_dataloader_at(size), max_batches):
        batch = move_data_to_device(batch, device)
        if prepare is not None:
            batch = prepare(batch, train=False)
        with torch.autocast(device.type, dtype=half or torch.bfloat16, enabled=half is not None):
            loss, ok, n = module.evaluate_batch(batch)
        loss_sum, correct, count = loss_sum + float(loss), correct + int(ok), count + int(n)
    return loss_sum, correct, count


@torch.inference_mode()
def evaluate_sizes(
    module,
    datamodule,
    sizes,
    strategies,
    kind: str,
    device=None,
    progress=True,
    max_batches: int | None = None,
    precision: str | int | None = None,
    timings: dict | None = None,
) -> dict[str, float]:
    """Accuracy (and loss) of ``module`` for every strategy x size. ``module`` provides ``encoding`` and
    ``evaluate_batch(batch) -> (loss_sum, correct, count)``; ``datamodule`` provides
    ``test_dataloader_at(size)`` and optionally ``prepare_batch(batch, train=False)``. A strategy that
    refuses a size records NaN and its reason is printed. ``max_batches``: only the first that many
    test batches per size (smoke runs: ``fast_dev_run``, ``debug=fast``); None = the whole test set.
    Runs under ``torch.inference_mode`` with the datamodule's eval batch size, and under autocast when
    ``precision`` is a Lightning mixed precision (``bf16-mixed``, ``16-mixed``): the precision the
    run's own test used, so the scores at every size match ``test/acc``'s. ``timings``: a dict that
    receives ``(seconds, count scored)`` per size (keyed as the progress bar shows it: ``16``,
    ``16x32``, ``256``), summed over the strategies: where the evaluation's time went (the count:
    images, or scored tokens of sequences)."""
    from tqdm.auto import tqdm

    pe = module.encoding
    default = pe.strategy
    device = torch.device(device) if device is not None else next(module.parameters()).device
    half = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(str(precision))
    was_training = module.training
    module.eval()
    results: dict[str, float] = {}
    jobs = [(s, n) for s in strategies for n in sizes]
    what = "resolution" if kind == "res" else "length"
    bar = tqdm(jobs, desc=f"test at {what}", disable=not progress)
    try:
        for strategy, size in bar:
            shown = size_name(size) if kind == "res" else size
            bar.set_description(f"test at {what} {shown}" + (f" ({strategy})" if len(strategies) > 1 else ""))
            with pe.using_strategy(strategy):
                where = (kind, size, strategy, default, resampling_of(datamodule, kind, size))
                name, loss = metric_name(*where), metric_name(*where, stat="loss")
                start, count = time.perf_counter(), 0
                try:
                    loss_sum, correct, count = score_at(module, datamodule, size, device, half, max_batches)
                    results[name], results[loss] = correct / max(count, 1), loss_sum / max(count, 1)
                except ValueError as err:
                    print(f"{name}: not evaluated: {err}", file=sys.stderr)
                    results[name] = results[loss] = math.nan
            if timings is not None:  # per size, over its strategies (a refused one: its short time, no images)
                seconds, images = timings.get(shown, (0.0, 0))
                timings[shown] = (seconds + time.perf_counter() - start, images + count)
    finally:
        bar.close()
        module.train(was_training)
    return results


def evaluate_module(
    module, datamodule, eval_cfg, kind: str, device=None, max_batches=None, progress: bool = True, precision=None
) -> dict[str, float]:
    """The end-of-training evaluation configured by ``eval``: ``eval.resolutions``
    for images (``kind="res"``) or ``eval.lengths`` for sequences (``kind="len"``);
    ``eval.max_batches`` (else the argument) caps the test batches per size;
    ``eval.test_subset`` scores images on a fixed, seeded subset of the test set. ``progress``:
    show the progress bar (not for jobs that run side by side); ``precision``: the trainer's."""
    sizes = (eval_cfg or {}).get("resolutions" if kind == "res" else "lengths")
    if not sizes:
        return {}
    strategies = choose_strategies(module.encoding, eval_cfg["strategies"])
    max_batches = (eval_cfg or {}).get("max_batches") or max_batches
    use_test_subset(datamodule, (eval_cfg or {}).get("test_subset"))
    sizes = [plain_size(s) for s in sizes] if kind == "res" else list(sizes)  # a side, or (h, w)
    timings: dict = {}
    results = evaluate_sizes(
        module, datamodule, sizes, strategies, kind, device, progress, max_batches, precision, timings
    )
    if progress:  # one run at the console: where the evaluation's time went, and how to cut it
        print(timing_line(kind, timings, len(strategies), eval_cfg))
    return results


def use_test_subset(datamodule, subset: int | None) -> int | None:
    """Score the other image sizes on a fixed, seeded subset of at most ``subset`` test images
    (``eval.test_subset``; None: all of them), the one rule for training's evaluation and
    ``python -m vitpos.extrapolate``'s (the datamodule's ``limit_extrapolation``, seeded by
    ``data.split_seed``: the same images in both). Returns how many test images each size scores,
    None for a datamodule without images (sequences have their own count)."""
    if not hasattr(datamodule, "limit_extrapolation"):
        return None
    datamodule.limit_extrapolation(subset)
    test = getattr(datamodule, "test", None)
    total = len(test[0]) if test is not None else subset
    return total if subset is None or total is None else min(subset, total)


def timing_line(kind: str, timings: dict, n_strategies: int, eval_cfg) -> str:
    """One line: the seconds each size took (``timings`` of :func:`evaluate_sizes`), on how many
    test images (sequences count scored tokens, which differ by length: no count), and the
    options that trim or skip it."""
    parts = ", ".join(f"{kind}{size} {seconds:.1f} s" for size, (seconds, _) in timings.items())
    total = sum(seconds for seconds, _ in timings.values())
    strategies = f" x {n_strategies} strategies" if n_strategies > 1 else ""
    if kind != "res":
        return f"other lengths: {total:.1f} s{strategies} (none: eval.lengths=[]): {parts}"
    each = max((n for _, n in timings.values()), default=0) // max(n_strategies, 1)
    subset = (eval_cfg or {}).get("test_subset")
    how = f"eval.test_subset={subset}" if subset else "eval.test_subset=null: all of them"
    trim = f"{how}; fewer: eval.test_subset=N, none: eval.resolutions=[]"
    return f"other resolutions: {total:.1f} s on {each:,} test images each{strategies} ({trim}): {parts}"
