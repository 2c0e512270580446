"""Copy the finished runs of a sweep, without their checkpoints, next to a committed report.

    python scripts/snapshot_runs.py runs/compare_cifar_full docs/results/cifar10_full/runs
    python scripts/snapshot_runs.py --portable docs/results/*/runs   # rewrite snapshots in place

Each ``<model>/<label>-<hash>/seed<k>`` folder whose ``metrics.json`` says ``complete`` is copied
with its ``metrics.json``, ``hparams.yaml``, per-image test predictions (``test_predictions.npz``,
runs since they exist) and TensorBoard event files (about 150 kB a run), so
the report can be regenerated (``python -m vitpos.compare runs=docs/results/cifar10_full/runs``) and a
sweep can continue on another machine: copy the snapshot back into ``runs/<group>/`` and rerun
the sweep command; the finished runs are skipped (their metrics.json is all it checks when no
checkpoint is there) and only the missing ones train.

A copy is made portable (:func:`portable`): no absolute path (``run.root`` and ``data.root``
relative to the repository, the best checkpoint relative to its run folder), and the record that
names the run without its data or machine (``run.data_fingerprint``, ``run.precision``,
``run.machine``: :func:`vitpos.run.identity.record`), so that the snapshot names its own folder
in any clone. ``--portable`` does the same to snapshots already committed; a record a run lacks
(runs older than the record) is found from what its folder's hash covers.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from vitpos.data.fingerprint import data_fingerprint
from vitpos.run.identity import run_dir
from vitpos.run.status import relative_to_run

REPO = Path(__file__).resolve().parents[1]
#: what a precision of ``auto`` resolved to says of the CPU (every committed run trained on a CPU)
MACHINE_OF = {"bf16-mixed": "cpu-avx512bf16", "32-true": "cpu-avx2"}


def snapshot(src: Path, dst: Path) -> int:
    copied = 0
    for status in sorted(src.glob("*/*/seed*/metrics.json")):
        run = status.parent
        if json.loads(status.read_text()).get("status") != "complete":
            continue
        target = dst / run.relative_to(src)
        shutil.rmtree(target, ignore_errors=True)  # a run trained again replaces its copy: no stale event files
        target.mkdir(parents=True)
        for f in [status, run / "hparams.yaml", run / "test_predictions.npz", *run.glob("events.out.tfevents.*")]:
            if f.is_file():
                shutil.copy2(f, target / f.name)
        portable(target, run)
        copied += 1
    return copied


def repo_relative(path) -> str | None:
    """An absolute path inside the repository as a relative one; outside it, its last part."""
    if not isinstance(path, str) or not Path(path).is_absolute():
        return path
    return str(Path(path).relative_to(REPO)) if Path(path).is_relative_to(REPO) else Path(path).name


def portable(folder: Path, origin: Path | None = None) -> None:
    """Rewrite the snapshot run in ``folder`` (copied from ``origin``, default itself) in place:
    no absolute path, and the run's record (see the module docstring)."""
    hparams_file, status_file = folder / "hparams.yaml", folder / "metrics.json"
    hparams = yaml.safe_load(hparams_file.read_text()) or {}
    cfg = hparams.get("cfg") or {}
    if {"run", "data", "trainer"} <= set(cfg):  # a vitpos run's saved config
        complete_record(cfg, folder)
        cfg["run"]["root"] = repo_relative(cfg["run"].get("root"))
        cfg["data"]["root"] = repo_relative(cfg["data"].get("root"))
    if "root" in hparams:  # the data module's own copy of its options
        hparams["root"] = repo_relative(hparams["root"])
    hparams_file.write_text(yaml.safe_dump(hparams, sort_keys=False))
    status = json.loads(status_file.read_text())
    if status.get("best_checkpoint"):
        status["best_checkpoint"] = inside_run(relative_to_run(origin or folder, status["best_checkpoint"]))
        status_file.write_text(json.dumps(status, indent=1, sort_keys=True) + "\n")


def inside_run(path: str) -> str:
    """A checkpoint path written where the run trained, from the run folder on
    (``checkpoints/<file>``: the folder may have been renamed since); other paths unchanged."""
    parts = Path(path).parts
    return str(Path(*parts[parts.index("checkpoints") :])) if "checkpoints" in parts else path


def complete_record(cfg: dict, folder: Path) -> None:
    """Add what :func:`vitpos.run.identity.record` writes where ``cfg`` lacks it: the data's
    fingerprint (read at ``data.root``, which must still hold the data) and the precision that
    names ``folder`` (``auto`` hashes as what it resolved to)."""
    run = cfg["run"]
    if run.get("data_fingerprint") is None and (fingerprint := data_fingerprint(cfg["data"])) is not None:
        run["data_fingerprint"] = fingerprint
    if run.get("precision") is None:
        chosen = cfg["trainer"]["precision"]
        for precision in ("bf16-mixed", "32-true") if chosen == "auto" else (chosen,):
            named = run_dir(OmegaConf.create({**cfg, "run": {**run, "precision": precision}}))
            if named.parts[-3:] == folder.parts[-3:]:
                run["precision"] = precision
                break
        else:
            root = cfg["data"].get("root")
            raise SystemExit(f"{folder}: no precision names this folder (is the data at data.root={root}?)")
    if run.get("machine") is None:
        run["machine"] = MACHINE_OF.get(run["precision"], "unknown")


def main(argv: list[str]) -> str:
    if argv[:1] == ["--portable"] and len(argv) > 1:
        runs = [status.parent for root in argv[1:] for status in sorted(Path(root).glob("*/*/seed*/metrics.json"))]
        for run in runs:
            portable(run)
        return f"{len(runs)} snapshot run(s) made portable"
    if len(argv) != 2:
        sys.exit(__doc__)
    return f"{snapshot(Path(argv[0]), Path(argv[1]))} finished run(s) copied to {argv[1]}"


if __name__ == "__main__":
    print(main(sys.argv[1:]))
