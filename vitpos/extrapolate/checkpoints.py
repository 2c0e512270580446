"""``python -m vitpos.extrapolate``: evaluate saved checkpoints beyond their training size.

The options and the ``--help`` text are :class:`ExtrapolateOptions`. Every checkpoint of
``ckpt=`` (files, runs folders, glob patterns) is evaluated at every size and strategy
asked; one that cannot be loaded or evaluated is listed at the end and does not stop the
others (exit code 1). Outputs are rewritten after every size, so a later failure never
loses what was computed.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from vitpos.cli.options import option, parse_options
from vitpos.errors import UserError
from vitpos.eval_memory import memory_problem
from vitpos.extrapolate import choose_strategies, evaluate_sizes, resampling_of, use_test_subset
from vitpos.extrapolate.plot import plot_curves
from vitpos.metrics import metric_name
from vitpos.run.checkpoint import CheckpointError, find_checkpoints, task_kind
from vitpos.runtime import resolve_precision
from vitpos.sizes import as_hw, column_order, compact, is_integer, plain_size
from vitpos.tables import frame_to_markdown
from vitpos.tasks.build import from_checkpoint, load_plugin

OPTION = {"res": "resolutions", "len": "lengths"}
RUN = "run"  # test_subset=: the run's own eval.test_subset, as its training evaluated the other sizes


@dataclass
class ExtrapolateOptions:
    """Evaluate trained checkpoints beyond their training size: larger image resolutions,
    longer sequences, with every extrapolation strategy of their encoding.

    ckpt= is a .ckpt file written by train.py, a run folder or a runs folder, or a glob pattern,
    expanded by the tool itself (bash does not expand patterns inside key=value); a pattern that
    matches nothing is refused. Of each run folder, the checkpoint its own report scored is used
    (the best by val/acc, as the run chose; last.ckpt only where it saved no best one), so the
    numbers equal the run's; each file chosen is printed. resolutions= applies to image checkpoints and
    lengths= to sequence ones (default: the run's own eval.resolutions / eval.lengths); an
    option that does not apply to a checkpoint's task is refused for that checkpoint. Each image
    size is scored on the run's own eval.test_subset, the fixed, seeded test images its training
    scored them on (so the numbers equal the ones printed after training); test_subset=N for
    another count, test_subset=null for the whole test set.

    Prints one table (rows: run and strategy; columns: the square sizes, then h x w ones; accuracy
    in %) and writes extrapolation.csv (its test_images: how many each size scored),
    extrapolation.md and extrapolation.png into out=, rewritten after every size. A checkpoint
    that cannot be loaded or evaluated (corrupt, unsafe pickle, a size too large for memory) is
    skipped, the others go on, and every failure is listed at the end (exit code 1). Checkpoints
    are loaded with weights_only=True: a file that needs arbitrary Python objects is refused.

    Examples:
      python -m vitpos.extrapolate ckpt=runs/shapes/vit_cpu/sincos_2d-*/seed0
      python -m vitpos.extrapolate ckpt=runs/compare_cifar_quick resolutions=[32,48] strategies=default
      python -m vitpos.extrapolate ckpt=runs/seq_copy lengths=[32,128] out=extrapolation/seq_copy
      python -m vitpos.extrapolate ckpt=runs/shapes/vit_cpu/sincos_2d-*/seed0 test_subset=null   # every test image
    """

    ckpt: list[str] = option([], "a .ckpt file, a run folder (its report's checkpoint), a runs folder or a pattern",
                             metavar="PATH", repeat=True, required=True, example="runs/.../seed0")  # fmt: skip
    resolutions: list[Any] | None = option(None, "image sizes to test, in pixels: a side or [h,w]",
                                           metavar="[INT|[H,W],...]", example="[16,[16,32],32]",
                                           default_text="the run's eval.resolutions")  # fmt: skip
    lengths: list[int] | None = option(None, "sequence lengths to test, in tokens", example="[32,128]",
                                       default_text="the run's eval.lengths")  # fmt: skip
    test_subset: Any = option(RUN, "test images each image size scores: a fixed, seeded subset of this many "
                              "(as in training); null: all", metavar="INT|null",
                              default_text="the run's eval.test_subset", example="1000")  # fmt: skip
    strategies: Any = option("all", "all, default (the run's own), or a list such as [ntk,yarn]",
                             metavar="all|default|[NAME,...]")  # fmt: skip
    out: str = option("extrapolation", "the folder for extrapolation.csv, .md and .png", metavar="DIR")
    device: str = option("cuda" if torch.cuda.is_available() else "cpu", "where to evaluate: cpu, cuda, cuda:1, ...",
                         metavar="DEVICE", default_text="cuda when available, else cpu")  # fmt: skip
    module: str | None = option(
        None,
        "the plug-in encoding's .py file or module the run trained with "
        "(its encoding.module=); never loaded from the checkpoint",
        metavar="FILE|MODULE",
    )
    allow_changed_code: bool = option(
        False, "use a plug-in whose source changed since the run trained (refused by default: its digest differs)"
    )
    data: dict[str, Any] = option({}, "overrides the run's data config, e.g. data.eval_batch_size=64",
                                  default_text="the run's", example="data.eval_batch_size=64")  # fmt: skip


class SkipCheckpoint(ValueError):
    """This checkpoint cannot be evaluated as asked; the message says why and what to change."""


def checkpoint_label(path: Path, root: Path | None) -> str:
    """The run folder relative to the folder it was found in (``rope_2d/seed0``), else its last two parts."""
    run = path.parent.parent if path.parent.name == "checkpoints" else path.parent
    if root is not None and run != root and run.is_relative_to(root):
        return run.relative_to(root).as_posix()
    return f"{run.parent.name}/{run.name}"


def is_size(kind: str, size) -> bool:
    """A length is a positive integer; an image size a side or an ``[h, w]`` pair (:func:`as_hw`)."""
    if kind == "len":
        return is_integer(size) and size > 0
    try:
        return bool(as_hw(size))
    except ValueError:
        return False


def sizes_for(opts: ExtrapolateOptions, kind: str, cfg) -> list:
    """The sizes to evaluate: the option for this checkpoint's task, else the run's own ``eval`` list
    (image sizes as a side or ``(h, w)``)."""
    other = "len" if kind == "res" else "res"
    if getattr(opts, OPTION[other]) is not None:
        task = "an image" if kind == "res" else "a sequence"
        raise SkipCheckpoint(
            f"{OPTION[other]}= does not apply to {task} checkpoint; pass {OPTION[kind]}=[...] instead "
            f"(or give image and sequence checkpoints in separate calls)"
        )
    sizes = getattr(opts, OPTION[kind])
    if sizes is None:
        sizes = list((cfg.get("eval") or {}).get(OPTION[kind]) or [])
    sizes = sizes if isinstance(sizes, list) else [sizes]
    if not sizes or not all(is_size(kind, s) for s in sizes):
        what = "positive integers, or [h,w] pairs of them" if kind == "res" else "positive integers"
        raise SkipCheckpoint(f"{OPTION[kind]}={sizes}: give {what}, e.g. {OPTION[kind]}=[16,32,48]")
    return [plain_size(s) for s in sizes] if kind == "res" else sizes


def test_subset_for(opts: ExtrapolateOptions, cfg) -> int | None:
    """The test images each image size is scored on: ``test_subset=``, else the run's own
    ``eval.test_subset`` (a run saved before the option existed scored all of them: None)."""
    return (cfg.get("eval") or {}).get("test_subset") if opts.test_subset == RUN else opts.test_subset


def check_memory(cfg, kind: str, sizes: list, num_test: int | None, device: str) -> None:
    """Refuse, before evaluating anything, a size whose evaluation would not fit in the memory free on
    ``device`` (the one estimate and rule: :func:`vitpos.eval_memory.memory_problem`); ``num_test``:
    the test images each image size scores."""
    num_test = num_test if kind == "res" else int(cfg.data.num_length_test)
    problem = memory_problem(cfg, kind, [(OPTION[kind], size) for size in sizes], num_test, device)
    if problem is not None:
        raise SkipCheckpoint(str(problem))


def evaluate_checkpoint(path, root, opts, data_overrides, rows, failures, write) -> None:
    """Append one checkpoint's rows (writing the outputs after every size); record failures."""
    module, datamodule, plain = from_checkpoint(path, data_overrides)
    datamodule.setup("test")
    module, cfg = module.to(opts.device), OmegaConf.create(plain)
    kind = task_kind(OmegaConf.to_container(cfg, resolve=True))
    sizes = sizes_for(opts, kind, cfg)
    images = use_test_subset(datamodule, test_subset_for(opts, cfg)) if kind == "res" else None
    check_memory(cfg, kind, sizes, images, opts.device)
    strategies = choose_strategies(module.encoding, opts.strategies)
    default, label = module.encoding.strategy, checkpoint_label(path, root)
    # the precision trainer.precision=auto gives on this device (bf16 autocast where it is native): what a
    # run trained with auto here was tested in, so standalone scores match the ones printed after training
    precision = resolve_precision("auto", "gpu" if torch.device(opts.device).type == "cuda" else "cpu")
    for size in sizes:
        try:
            results = evaluate_sizes(module, datamodule, [size], strategies, kind, opts.device, precision=precision)
        except (RuntimeError, MemoryError, ValueError) as err:  # torch.OutOfMemoryError is a RuntimeError
            failures.append(f"{path}: {OPTION[kind]}={compact(size)}: {type(err).__name__}: {str(err).splitlines()[0]}")
            continue
        for strategy in strategies:
            resampling = resampling_of(datamodule, kind, size)
            acc = results[metric_name(kind, size, strategy, default, resampling)]
            row = {"run": label, "strategy": strategy, "kind": kind, "size": compact(size), "resampling": resampling}
            rows.append({**row, "acc": acc, "test_images": images})
        write()


def evaluate_checkpoints(opts: ExtrapolateOptions, write=lambda rows: None) -> tuple[list[dict], list[str]]:
    """(rows, failures): every checkpoint of ``opts.ckpt``, one failing not stopping the others.

    When no checkpoint given is usable at all (not a checkpoint, unsafe, corrupt), that is bad
    input: the first :class:`CheckpointError` is raised (one line, exit code 2)."""
    rows: list[dict] = []
    failures: list[str] = []
    unusable: list[CheckpointError] = []
    data_overrides = {f"data.{k}": v for k, v in opts.data.items()}
    checkpoints = find_checkpoints(opts.ckpt)
    for hit in checkpoints:
        path, root = hit.path, hit.root
        if hit.line():
            print(hit.line(), flush=True)
        try:
            evaluate_checkpoint(path, root, opts, data_overrides, rows, failures, lambda: write(rows))
        except CheckpointError as err:
            unusable.append(err)
            failures.append(str(err) if str(err).startswith("ckpt=") else f"{path}: {err}")
        except SkipCheckpoint as err:
            failures.append(str(err) if str(err).startswith("ckpt=") else f"{path}: {err}")
        except Exception as err:  # noqa: BLE001  (one bad run must not lose the others)
            failures.append(f"{path}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
    if unusable and len(unusable) == len(checkpoints):
        raise unusable[0]
    return rows, failures


def write_outputs(rows: list[dict], out: Path, plot: bool = True) -> str:
    """``extrapolation.csv`` (fractions), ``.md`` (percent) and ``.png`` under ``out``; returns the table."""
    import pandas as pd

    out.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(rows)
    frame.to_csv(out / "extrapolation.csv", index=False)
    upsampled = frame.get("resampling", pd.Series("native", index=frame.index)) == "upsampled"
    frame["column"] = [f"{s} (upsampled)" if up else str(s) for s, up in zip(frame["size"], upsampled)]
    firsts = frame.drop_duplicates("column")  # the squares by side, then h x w by pixels (16 24 32 16x32 32x16)
    order = [c for _, c in sorted(zip(map(column_order, firsts["size"]), firsts["column"]))]
    table = frame.pivot_table(index=["run", "strategy"], columns="column", values="acc", sort=False, dropna=False)
    table = table[order]
    frame = frame.drop(columns="column")
    text = frame_to_markdown(table, cell=lambda v: "refused" if math.isnan(v) else f"{100 * v:.1f}")
    (out / "extrapolation.md").write_text(text + "\n")
    if plot:
        plot_curves(frame, out / "extrapolation.png")
    return text


def main(argv: list[str] | None = None) -> int:
    opts = parse_options(argv, ExtrapolateOptions, prog="python -m vitpos.extrapolate",
                         usage="ckpt=PATH [ckpt=PATH ...] [key=value ...]")  # fmt: skip
    if isinstance(opts.strategies, str) and opts.strategies not in ("all", "default"):
        opts.strategies = [opts.strategies]  # one strategy by name
    for size in opts.resolutions or []:  # a malformed size is bad input (exit 2), before any checkpoint loads
        as_hw(size, "resolutions")
    if opts.test_subset not in (RUN, None) and not (is_integer(opts.test_subset) and opts.test_subset > 0):
        raise UserError("test_subset", f"must be a positive integer or null, got {opts.test_subset!r}",
                        "e.g. test_subset=1000; test_subset=null scores every test image")  # fmt: skip
    load_plugin(opts.module, opts.allow_changed_code)
    out = Path(opts.out)
    rows, failures = evaluate_checkpoints(opts, write=lambda rows: write_outputs(rows, out, plot=False))
    if rows:
        print(write_outputs(rows, out))
        print(f"wrote {out}/extrapolation.csv, .md and .png")
    if failures:
        print(f"\n{len(failures)} failed (the others were evaluated):", file=sys.stderr)
        for line in failures:
            print(f"  - {line}", file=sys.stderr)
        return 1
    return 0
