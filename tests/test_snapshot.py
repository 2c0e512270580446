"""scripts/snapshot_runs.py: only finished runs are copied, and never their checkpoints; every
committed snapshot run sits in the folder its own config names today, so that a snapshot copied
back into ``runs/<group>`` is found by its sweep (those runs report their metrics, only the
missing ones train: docs/results/*/README.md)."""

import json

import pytest
import yaml
from omegaconf import OmegaConf

from scripts import snapshot_runs
from scripts.report_rows import RESULTS
from vitpos.run.identity import run_dir

SNAPSHOT_RUNS = sorted(RESULTS.glob("*/runs/*/*/seed*/hparams.yaml"))


def make_run(folder, status):
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "last.ckpt").write_bytes(b"weights")
    (folder / "metrics.json").write_text(json.dumps({"status": status, "metrics": {"test/acc": 0.5}}))
    (folder / "hparams.yaml").write_text("cfg: {}\n")
    (folder / "events.out.tfevents.1.vm.1.0").write_bytes(b"events")


def test_only_finished_runs_are_copied_and_never_their_checkpoints(tmp_path):
    src, dst = tmp_path / "runs" / "sweep", tmp_path / "snapshot"
    make_run(src / "vit_cpu" / "none-aaaaaa" / "seed0", "complete")
    make_run(src / "vit_cpu" / "none-aaaaaa" / "seed1", "diverged")
    assert snapshot_runs.snapshot(src, dst) == 1
    copied = dst / "vit_cpu" / "none-aaaaaa" / "seed0"
    assert sorted(p.name for p in copied.iterdir()) == [
        "events.out.tfevents.1.vm.1.0", "hparams.yaml", "metrics.json"
    ]  # fmt: skip
    assert not (dst / "vit_cpu" / "none-aaaaaa" / "seed1").exists()


def folders_named_by(cfg) -> set[tuple[str, ...]]:
    """(model, label-hash, seed) of the run folder ``cfg`` trains in, for each precision ``auto``
    can resolve to (bf16-mixed on a CPU with native bf16, 32-true elsewhere)."""
    names = set()
    for precision in ("bf16-mixed", "32-true") if cfg.trainer.precision == "auto" else (cfg.trainer.precision,):
        resolved = cfg.copy()
        OmegaConf.update(resolved, "trainer.precision", precision)
        names.add(run_dir(resolved).parts[-3:])
    return names


def test_there_are_committed_snapshot_runs():
    assert len({p.relative_to(RESULTS).parts[0] for p in SNAPSHOT_RUNS}) >= 5, SNAPSHOT_RUNS


@pytest.mark.parametrize("hparams", SNAPSHOT_RUNS, ids=[str(p.parent.relative_to(RESULTS)) for p in SNAPSHOT_RUNS])
def test_a_committed_run_sits_where_its_config_trains(hparams):
    """A folder named by an older hash (the hash has since covered the resolved precision, among
    other keys) would make its sweep train the run again instead of reporting it."""
    cfg = OmegaConf.create(yaml.safe_load(hparams.read_text())["cfg"])
    assert hparams.parent.parts[-3:] in folders_named_by(cfg), (hparams.parent, folders_named_by(cfg))
