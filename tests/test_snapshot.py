"""scripts/snapshot_runs.py: only finished runs are copied, and never their checkpoints."""

import json

from scripts import snapshot_runs


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
