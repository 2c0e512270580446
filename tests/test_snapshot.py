"""scripts/snapshot_runs.py: only finished runs are copied, and never their checkpoints; every
committed snapshot run sits in the folder its own config names today, so that a snapshot copied
back into ``runs/<group>`` is found by its sweep (those runs report their metrics, only the
missing ones train: docs/results/*/README.md)."""

import json
import re
import shutil

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


def test_there_are_committed_snapshot_runs():
    assert len({p.relative_to(RESULTS).parts[0] for p in SNAPSHOT_RUNS}) >= 5, SNAPSHOT_RUNS


@pytest.mark.parametrize("hparams", SNAPSHOT_RUNS, ids=[str(p.parent.relative_to(RESULTS)) for p in SNAPSHOT_RUNS])
def test_a_committed_run_sits_where_its_config_trains(hparams):
    """A folder named by an older hash would make its sweep train the run again instead of
    reporting it. The saved config names its folder by itself (the data's fingerprint and the
    resolved precision are recorded in ``run``), so this holds in any clone, without the data."""
    cfg = OmegaConf.create(yaml.safe_load(hparams.read_text())["cfg"])
    assert run_dir(cfg).parts[-3:] == hparams.parent.parts[-3:]


#: an absolute path in a text: after a space, a quote, '=' or '(' (a URL's '//' is not one)
ABSOLUTE = re.compile(r"""(?:^|[\s"'=(])/(?:home|root|work|tmp|mnt|Users|var|opt|srv|data)\b""", re.M)


def test_no_committed_result_holds_an_absolute_path():
    texts = [p for p in RESULTS.rglob("*") if p.is_file() and p.suffix in (".yaml", ".json", ".md", ".csv", ".txt")]
    assert len(texts) > 300
    found = [f"{p.relative_to(RESULTS)}: {m.group(0)!r}" for p in texts for m in ABSOLUTE.finditer(p.read_text())]
    assert not found, found[:5]


def test_the_snapshot_tool_makes_a_copied_run_portable(tmp_path):
    """What a run writes where it trained (absolute roots, the full path of its best checkpoint)
    is rewritten in the copy, and the copy still names the folder it came from."""
    (committed,) = [
        p.parent for p in SNAPSHOT_RUNS if "cifar10_full/runs/vit_cpu_d96/cpe-" in str(p) and "seed0" in str(p)
    ]
    src = tmp_path / "runs" / "compare_cifar_full"
    run = src / committed.relative_to(committed.parents[2])
    shutil.copytree(committed, run)
    hparams = yaml.safe_load((run / "hparams.yaml").read_text())
    hparams["cfg"]["run"]["root"] = str(tmp_path / "runs")
    (run / "hparams.yaml").write_text(yaml.safe_dump(hparams, sort_keys=False))
    status = json.loads((run / "metrics.json").read_text())
    status["best_checkpoint"] = str(run / "checkpoints" / "best-epoch019.ckpt")
    (run / "metrics.json").write_text(json.dumps(status))
    assert snapshot_runs.snapshot(src, tmp_path / "snap") == 1
    copied = tmp_path / "snap" / run.relative_to(src)
    saved = yaml.safe_load((copied / "hparams.yaml").read_text())["cfg"]
    assert saved["run"]["root"] == "runs" and not ABSOLUTE.search((copied / "hparams.yaml").read_text())
    assert json.loads((copied / "metrics.json").read_text())["best_checkpoint"] == "checkpoints/best-epoch019.ckpt"
    assert run_dir(OmegaConf.create(saved)).parts[-3:] == committed.parts[-3:]

    # the same run trained again: its copy is replaced, not merged (one run's event files, not two)
    for old_events in run.glob("events.out.tfevents.*"):
        old_events.rename(old_events.with_name(old_events.name + ".retrained"))
    assert snapshot_runs.snapshot(src, tmp_path / "snap") == 1
    assert sorted(f.name for f in copied.iterdir()) == sorted(f.name for f in run.iterdir() if f.is_file())


def test_a_run_saves_its_per_image_predictions_and_the_snapshot_keeps_them(tmp_path):
    """The predicted and true class of every test image, in test-set order: their agreement is the
    run's test/acc, so a comparison can also bootstrap over test images."""
    import numpy as np
    from conftest import finished_run
    from test_bad_input import TINY

    run = finished_run(tmp_path / "runs", *TINY)
    saved = np.load(run / "test_predictions.npz")
    assert saved["predicted"].dtype == np.uint8 and len(saved["true"]) == 64  # data.num_test=64
    accuracy = float((saved["predicted"] == saved["true"]).mean())
    assert accuracy == pytest.approx(json.loads((run / "metrics.json").read_text())["metrics"]["test/acc"])
    assert snapshot_runs.snapshot(run.parents[2], tmp_path / "snap") == 1
    assert (tmp_path / "snap" / run.relative_to(run.parents[2]) / "test_predictions.npz").is_file()
