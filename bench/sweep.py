"""A 4-job sweep run one job at a time with every thread vs two jobs side by
side with half the threads each (Hydra's joblib launcher, ``threads=auto``).

Both sweeps are the same ``python train.py -m`` command on the CIFAR-10 copy
(the quick sweep's recipe, 4 encodings, short budget) in a fresh ``run.root``,
timed as a whole from the shell, so every cost a user pays (start-up, data
load, compilation, evaluation) is in. Peer: one job at a time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vitpos.runtime import usable_cores

from .timing import header, table

ROOT = Path(__file__).resolve().parents[1]
ENCODINGS = "none,learned_1d,rope_2d,rel_bias_2d"


def sweep_seconds(extra: list[str], root: Path, quick: bool, data_root: str, env: dict) -> float:
    args = [
        sys.executable, "train.py", "-m", "experiment=compare_cifar_quick", f"encoding={ENCODINGS}", "seed=0",
        f"run.root={root}", f"data.root={data_root}", f"trainer.max_epochs={1 if quick else 2}",
        f"data.train_subset={2000 if quick else 6000}", "eval.resolutions=[32]", "task.pictures=false",
        f"hydra.sweep.dir={root}/multirun", *extra,
    ]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(args, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def run(quick: bool, data_root: str = "data/cifar10") -> None:
    if not (Path(data_root) / "train").is_dir():
        print(f"\n## sweep: skipped: no CIFAR-10 ImageFolder copy at {data_root} (data_root=DIR)")
        return
    cores = usable_cores()
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    data_root = str(Path(data_root).resolve())
    with tempfile.TemporaryDirectory() as tmp:
        sequential = f"1 job at a time, {cores} threads"
        side_by_side = f"2 jobs side by side, {max(cores // 2, 1)} thread(s) each"
        times = {
            sequential: sweep_seconds([f"threads={cores}"], Path(tmp) / "a", quick, data_root, env),
            side_by_side: sweep_seconds(
                ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"], Path(tmp) / "b", quick, data_root, env
            ),
        }
    header(f"a 4-job sweep (python train.py -m, {ENCODINGS}), whole command wall time")
    rows = [[k, f"{t:.0f}", f"{times[sequential] / t:.2f}x"] for k, t in times.items()]
    table(["sweep", "s", f"vs {sequential}"], rows)
