"""``python -m vitpos.extrapolate``: evaluate checkpoints beyond their training size.

usage: python -m vitpos.extrapolate ckpt=PATH [ckpt=PATH ...] [resolutions=[16,24,32,40,48,64]]
           [lengths=[32,64,128,256,512]] [strategies=all|default|[a,b]] [out=extrapolation]
           [data.KEY=VALUE ...] [device=cpu|cuda]

A ``ckpt`` may be a folder: every ``last.ckpt`` below it is used.
``resolutions=`` applies to image checkpoints and ``lengths=`` to sequence
ones (default: the run's own ``eval.resolutions`` / ``eval.lengths``); an
option that does not apply to a checkpoint's task is refused. Prints one table
(rows: run / strategy; columns: sizes, accuracy in %) and writes
``OUT/extrapolation.csv``, ``.md`` and ``.png``, rewritten after every size so
that a later failure never loses what was computed.

A checkpoint that cannot be loaded or evaluated (corrupt, unsafe pickle, a size
too large for memory) is skipped, the others go on, and every failure is listed
at the end; the exit code is then 1. Checkpoints are loaded with
``weights_only=True``: a file that needs arbitrary Python objects is refused.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import torch
from omegaconf import OmegaConf

from vitpos.cli import parse_args
from vitpos.extrapolate import choose_strategies, evaluate_sizes, metric_name
from vitpos.safe_load import CheckpointError, load_checkpoint, task_kind
from vitpos.tables import frame_to_markdown
from vitpos.validate import UserError

DEFAULTS = {
    "ckpt": [],
    "resolutions": None,
    "lengths": None,
    "strategies": "all",
    "out": "extrapolation",
    "device": "cuda" if torch.cuda.is_available() else "cpu",
    "data.": None,  # any data.<key>=value override
}
OPTION = {"res": "resolutions", "len": "lengths"}
MEMORY_FRACTION = 0.8  # of the memory available now, what one evaluation may plan to use


class SkipCheckpoint(ValueError):
    """This checkpoint cannot be evaluated as asked; the message says why and what to change."""


def find_checkpoints(paths: list[str]) -> list[tuple[Path, Path | None]]:
    """(checkpoint, the folder it was found in, or None for a file given directly)."""
    found = []
    for p in map(Path, paths):
        if p.is_dir():
            found += [(c, p) for c in sorted(p.rglob("last.ckpt"))]
        elif p.exists():
            found.append((p, None))
        else:
            raise UserError(f"ckpt={p}", "no such file or folder", "pass a .ckpt file or a runs folder")
    if not found:
        raise UserError("ckpt", "no checkpoints found", "pass ckpt=PATH: a .ckpt file or a runs folder")
    return found


def run_label(path: Path, root: Path | None) -> str:
    """The run folder relative to the folder it was found in (``rope_2d/seed0``), else its last two parts."""
    run = path.parent.parent if path.parent.name == "checkpoints" else path.parent
    if root is not None and run != root and run.is_relative_to(root):
        return run.relative_to(root).as_posix()
    return f"{run.parent.name}/{run.name}"


def load_run(path: Path, data_overrides: dict, device: str):
    """(module, datamodule, cfg) of one checkpoint, its data config overridable."""
    from vitpos.train import build

    checkpoint = load_checkpoint(path)
    saved = dict(checkpoint["hyper_parameters"]["cfg"])
    if not (saved.get("task") or {}).get("name"):  # checkpoints that saved only model/encoding/optim/data
        name = "sequence" if task_kind(saved) == "len" else "classification"
        saved["task"] = {**(saved.get("task") or {}), "name": name}
    cfg = OmegaConf.create(saved)
    for key, value in data_overrides.items():
        OmegaConf.update(cfg, key, value)
    module, datamodule = build(cfg)
    try:
        module.load_state_dict(checkpoint["state_dict"])
    except RuntimeError as err:
        raise CheckpointError(f"ckpt={path}: its weights do not fit the model its config describes: {err}") from None
    datamodule.setup("test")
    return module.to(device), datamodule, cfg


def sizes_for(opts: dict, kind: str, cfg) -> list[int]:
    """The sizes to evaluate: the option for this checkpoint's task, else the run's own ``eval`` list."""
    other = "len" if kind == "res" else "res"
    if opts[OPTION[other]] is not None:
        task = "an image" if kind == "res" else "a sequence"
        raise SkipCheckpoint(
            f"{OPTION[other]}= does not apply to {task} checkpoint; pass {OPTION[kind]}=[...] instead "
            f"(or give image and sequence checkpoints in separate calls)"
        )
    sizes = opts[OPTION[kind]]
    if sizes is None:
        sizes = list((cfg.get("eval") or {}).get(OPTION[kind]) or [])
    sizes = sizes if isinstance(sizes, list) else [sizes]
    if not sizes or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes):
        raise SkipCheckpoint(f"{OPTION[kind]}={sizes}: give positive integers, e.g. {OPTION[kind]}=[16,32,48]")
    return sizes


def available_memory(device: str) -> int:
    """Bytes free now on ``device`` (CUDA: the allocator's view; CPU: MemAvailable)."""
    if str(device).startswith("cuda") and torch.cuda.is_available():
        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def memory_estimate(cfg, kind: str, size: int, num_test: int) -> tuple[int, int, int, int]:
    """(bytes, tokens, batch, bytes of the inputs) one evaluation at ``size`` needs, roughly: the attention
    logits, softmax and bias of one batch (B, H, N, N) in float32 (3 copies), the
    activations (B, N, D) of one block, and for images the resized test set."""
    model, data = cfg.model, cfg.data
    batch = int(data.get("eval_batch_size") or data.get("batch_size") or 1)
    if kind == "res":
        tokens = (size // int(model.patch_size)) ** 2 + (1 if model.get("pool") == "cls" else 0)
        inputs = 2 * num_test * 3 * size * size * 4  # the resized copy and one intermediate
    else:
        tokens, inputs = size, num_test * size * 8
    batch = min(batch, max(num_test, 1))
    attention = 3 * batch * int(model.num_heads) * tokens * tokens * 4
    activations = 8 * batch * tokens * int(model.dim) * 4
    return attention + activations + inputs, tokens, batch, inputs


def check_memory(cfg, kind: str, sizes: list[int], datamodule, device: str) -> None:
    """Refuse, before evaluating anything, a size whose estimate exceeds the memory available."""
    test = getattr(datamodule, "test", None)
    num_test = len(test[0]) if kind == "res" and test is not None else int(cfg.data.get("num_length_test", 500))
    free = available_memory(device) * MEMORY_FRACTION
    for size in sizes:
        need, tokens, batch, inputs = memory_estimate(cfg, kind, size, num_test)
        if need > free:
            fit = int((free - inputs) // ((need - inputs) / batch)) if free > inputs else 0
            fix = f"data.eval_batch_size={fit} would fit" if fit >= 1 else "no data.eval_batch_size fits"
            raise SkipCheckpoint(
                f"{OPTION[kind]}: {size} is refused: at {tokens} tokens an evaluation needs about "
                f"{need / 2**30:,.1f} GiB (attention of a batch of {batch}, data.eval_batch_size) but "
                f"{free / 2**30:,.1f} GiB are available on {device}; use smaller sizes ({fix})"
            )


def evaluate_checkpoint(path, root, opts, data_overrides, rows, failures, write) -> None:
    """Append one checkpoint's rows (writing the outputs after every size); record failures."""
    module, datamodule, cfg = load_run(path, data_overrides, opts["device"])
    kind = task_kind(OmegaConf.to_container(cfg, resolve=True))
    sizes = sizes_for(opts, kind, cfg)
    check_memory(cfg, kind, sizes, datamodule, opts["device"])
    strategies = choose_strategies(module.encoding, opts["strategies"])
    default, label = module.encoding.strategy, run_label(path, root)
    for size in sizes:
        try:
            results = evaluate_sizes(module, datamodule, [size], strategies, kind, device=opts["device"])
        except (RuntimeError, MemoryError, ValueError) as err:  # torch.OutOfMemoryError is a RuntimeError
            failures.append(f"{path}: {OPTION[kind]}={size}: {type(err).__name__}: {str(err).splitlines()[0]}")
            continue
        for strategy in strategies:
            acc = results[metric_name(kind, size, strategy, default)]
            rows.append({"run": label, "strategy": strategy, "kind": kind, "size": size, "acc": acc})
        write()


def evaluate_checkpoints(opts: dict, write=lambda rows: None) -> tuple[list[dict], list[str]]:
    """(rows, failures): every checkpoint of ``opts['ckpt']``, one failing not stopping the others."""
    rows: list[dict] = []
    failures: list[str] = []
    data_overrides = {k: v for k, v in opts.items() if k.startswith("data.") and k != "data."}
    for path, root in find_checkpoints(opts["ckpt"]):
        try:
            evaluate_checkpoint(path, root, opts, data_overrides, rows, failures, lambda: write(rows))
        except (CheckpointError, SkipCheckpoint) as err:
            failures.append(str(err) if str(err).startswith("ckpt=") else f"{path}: {err}")
        except Exception as err:  # noqa: BLE001  (one bad run must not lose the others)
            failures.append(f"{path}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
    return rows, failures


def write_outputs(rows: list[dict], out: Path, plot: bool = True) -> str:
    """``extrapolation.csv`` (fractions), ``.md`` (percent) and ``.png`` under ``out``; returns the table."""
    import pandas as pd

    out.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(rows)
    frame.to_csv(out / "extrapolation.csv", index=False)
    table = frame.pivot_table(index=["run", "strategy"], columns="size", values="acc", sort=False, dropna=False)
    table = table[sorted(table.columns)]
    text = frame_to_markdown(table, cell=lambda v: "refused" if math.isnan(v) else f"{100 * v:.1f}")
    (out / "extrapolation.md").write_text(text + "\n")
    if plot:
        plot_curves(frame, out / "extrapolation.png")
    return text


def plot_curves(frame, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for (run, strategy), part in frame.groupby(["run", "strategy"], sort=False):
        part = part.sort_values("size")
        ax.plot(part["size"], 100 * part["acc"], marker="o", label=f"{run} ({strategy})")
    kinds = set(frame["kind"])
    xlabel = {"res": "test resolution (pixels)", "len": "test length (tokens)"}
    ax.set_xlabel(xlabel[kinds.pop()] if len(kinds) == 1 else "test resolution (pixels) or length (tokens)")
    ax.set_ylabel("test accuracy (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(sys.argv[1:] if argv is None else argv, DEFAULTS, repeatable=("ckpt",), usage=__doc__)
    out = Path(opts["out"])
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
