"""``python -m vitpos.extrapolate``: evaluate checkpoints beyond their training size.

    python -m vitpos.extrapolate ckpt=runs/compare_cifar/rope_2d/seed0/checkpoints/last.ckpt \
        [ckpt=...] [resolutions=[16,24,32,40,48,64]] [lengths=[32,64,128,256,512]] \
        [strategies=all|default|[a,b]] [out=extrapolation] [data.root=DIR] [device=cpu]

A ``ckpt`` may be a folder: every ``last.ckpt`` below it is used. Prints one
table (rows: run label / strategy; columns: sizes) and writes
``OUT/extrapolation.csv`` and ``OUT/extrapolation.png``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch
from omegaconf import OmegaConf

from vitpos.cli import parse_args
from vitpos.extrapolate import choose_strategies, evaluate_sizes, metric_name
from vitpos.tables import frame_to_markdown

DEFAULTS = {
    "ckpt": [],
    "resolutions": None,
    "lengths": None,
    "strategies": "all",
    "out": "extrapolation",
    "device": "cuda" if torch.cuda.is_available() else "cpu",
    "data.": None,  # any data.<key>=value override
}


def find_checkpoints(paths: list[str]) -> list[Path]:
    found = []
    for p in map(Path, paths):
        if p.is_dir():
            found += sorted(p.rglob("last.ckpt"))
        elif p.exists():
            found.append(p)
        else:
            raise SystemExit(f"ckpt={p}: no such file or folder")
    if not found:
        raise SystemExit("no checkpoints found; pass ckpt=PATH (a .ckpt file or a runs folder)")
    return found


def load_run(path: Path, data_overrides: dict, device: str):
    """(module, datamodule, label, kind) for one checkpoint, its data config overridable."""
    from vitpos.train import build

    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    cfg = OmegaConf.create(checkpoint["hyper_parameters"]["cfg"])
    if "task" not in cfg:  # checkpoints that saved only model/encoding/optim/data
        cfg.task = {"name": "sequence" if "train_len" in cfg.data else "classification"}
    for key, value in data_overrides.items():
        OmegaConf.update(cfg, key, value)
    module, datamodule = build(cfg)
    module.load_state_dict(checkpoint["state_dict"])
    datamodule.setup("test")
    run = path.parent.parent if path.parent.name == "checkpoints" else path.parent  # runs/<group>/<label>/seed<k>
    label = f"{run.parent.name}/{run.name}" if run.name.startswith("seed") else cfg.encoding.name
    return module.to(device), datamodule, label, "len" if cfg.task.name == "sequence" else "res"


def evaluate_checkpoints(opts: dict) -> list[dict]:
    rows = []
    data_overrides = {k: v for k, v in opts.items() if k.startswith("data.") and k != "data."}
    for path in find_checkpoints(opts["ckpt"]):
        module, datamodule, label, kind = load_run(path, data_overrides, opts["device"])
        evals = module.cfg.get("eval", {})
        sizes = opts["lengths" if kind == "len" else "resolutions"] or evals.get(
            "lengths" if kind == "len" else "resolutions"
        )
        strategies = choose_strategies(module.encoding, opts["strategies"])
        default = module.encoding.strategy
        results = evaluate_sizes(module, datamodule, sizes, strategies, kind, device=opts["device"])
        for strategy in strategies:
            for size in sizes:
                acc = results[metric_name(kind, size, strategy, default)]
                rows.append({"run": label, "strategy": strategy, "kind": kind, "size": size, "acc": acc})
    return rows


def write_outputs(rows: list[dict], out: Path) -> str:
    import pandas as pd

    out.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(rows)
    frame.to_csv(out / "extrapolation.csv", index=False)
    table = frame.pivot_table(index=["run", "strategy"], columns="size", values="acc", sort=False)
    text = frame_to_markdown(table, cell=lambda v: "refused" if math.isnan(v) else f"{100 * v:.1f}")
    (out / "extrapolation.md").write_text(text + "\n")
    plot_curves(frame, out / "extrapolation.png")
    return text


def plot_curves(frame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (run, strategy), part in frame.groupby(["run", "strategy"], sort=False):
        ax.plot(part["size"], 100 * part["acc"], marker="o", label=f"{run} ({strategy})")
    kind = frame["kind"].iloc[0]
    ax.set_xlabel("test resolution (pixels)" if kind == "res" else "test length (tokens)")
    ax.set_ylabel("test accuracy (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    opts = parse_args(sys.argv[1:] if argv is None else argv, DEFAULTS, repeatable=("ckpt",), usage=__doc__)
    rows = evaluate_checkpoints(opts)
    print(write_outputs(rows, Path(opts["out"])))
    print(f"wrote {opts['out']}/extrapolation.csv, .md and .png")
