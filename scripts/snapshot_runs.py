"""Copy the finished runs of a sweep, without their checkpoints, next to a committed report.

    python scripts/snapshot_runs.py runs/compare_cifar_full docs/results/cifar10_full/runs

Each ``<model>/<label>-<hash>/seed<k>`` folder whose ``metrics.json`` says ``complete`` is copied
with its ``metrics.json``, ``hparams.yaml`` and TensorBoard event files (about 130 kB a run), so
the report can be regenerated (``python -m vitpos.compare runs=docs/results/cifar10_full/runs``) and a
sweep can continue on another machine: copy the snapshot back into ``runs/<group>/`` and rerun
the sweep command; the finished runs are skipped (their metrics.json is all it checks when no
checkpoint is there) and only the missing ones train.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path


def snapshot(src: Path, dst: Path) -> int:
    copied = 0
    for status in sorted(src.glob("*/*/seed*/metrics.json")):
        run = status.parent
        if json.loads(status.read_text()).get("status") != "complete":
            continue
        target = dst / run.relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        for f in [status, run / "hparams.yaml", *run.glob("events.out.tfevents.*")]:
            if f.is_file():
                shutil.copy2(f, target / f.name)
        copied += 1
    return copied


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    n = snapshot(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"{n} finished run(s) copied to {sys.argv[2]}")
