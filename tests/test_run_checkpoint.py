"""The one checkpoint rule of every tool that takes a run folder (``vitpos.run.checkpoint``): the
checkpoint the run's own report scored (the best by val/acc, as the run chose), unless ``ckpt=``
names a file; each tool prints the file it used; best checkpoints named by a 0-based epoch (older
runs) are still found and loaded."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch
from ckpt_factory import IMAGE, make_checkpoint
from conftest import CONFIGS
from hydra import compose, initialize_config_dir

from vitpos.export.cli import main as export_main
from vitpos.extrapolate.checkpoints import main as extrapolate_main
from vitpos.run.checkpoint import (
    BEST_SO_FAR,
    LAST_ONLY,
    NAMED,
    REPORTED,
    find_checkpoints,
    load_checkpoint,
    newest_checkpoint,
    run_checkpoint,
)
from vitpos.run.status import write_status
from vitpos.train import train
from vitpos.viz.__main__ import main as viz_main


@pytest.fixture
def run_folder(tmp_path):
    """A run folder holding ``last.ckpt`` only (untrained weights, as a run saves them)."""
    run = tmp_path / "runs" / "shapes" / "vit_micro" / "rope_2d-abc123" / "seed0"
    make_checkpoint(run, *IMAGE, "encoding=rope_2d")
    return run


def add_best(run, name: str, mtime: float | None = None):
    best = run / "checkpoints" / name
    shutil.copyfile(run / "checkpoints" / "last.ckpt", best)
    if mtime is not None:
        os.utime(best, (mtime, mtime))
    return best


def test_a_finished_run_gives_the_checkpoint_its_report_scored(run_folder):
    best = add_best(run_folder, "best-epoch002.ckpt")
    add_best(run_folder, "best-epoch009.ckpt")  # a later best the report did not score: not taken
    write_status(run_folder, "complete", {"test/acc": 0.5}, best_checkpoint="checkpoints/best-epoch002.ckpt")
    assert run_checkpoint(run_folder / "checkpoints") == (best, REPORTED)


def test_a_run_still_training_gives_its_best_so_far_by_epoch_number(run_folder):
    add_best(run_folder, "best-epoch009.ckpt", mtime=1_000)  # older file, later epoch: the epoch decides
    add_best(run_folder, "best-epoch010.ckpt", mtime=2_000)
    latest = add_best(run_folder, "best-epoch011.ckpt", mtime=500)
    assert run_checkpoint(run_folder / "checkpoints") == (latest, BEST_SO_FAR)


def test_a_run_without_a_best_checkpoint_gives_last(run_folder):
    assert run_checkpoint(run_folder / "checkpoints") == (run_folder / "checkpoints" / "last.ckpt", LAST_ONLY)


def test_a_report_naming_a_missing_file_falls_back_to_the_best_there(run_folder):
    best = add_best(run_folder, "best-epoch003.ckpt")
    write_status(run_folder, "complete", {}, best_checkpoint="checkpoints/best-epoch099.ckpt")
    assert run_checkpoint(run_folder / "checkpoints") == (best, BEST_SO_FAR)


def test_every_way_of_naming_a_run_folder_finds_the_same_checkpoint(run_folder):
    best = add_best(run_folder, "best-epoch001.ckpt")
    pattern = str(run_folder).replace("seed0", "s*")
    for value in (run_folder, run_folder / "checkpoints", run_folder.parents[2], pattern):
        (hit,) = find_checkpoints([str(value)])
        assert (hit.path, hit.why) == (best, BEST_SO_FAR), value
    (hit,) = find_checkpoints([str(run_folder / "checkpoints" / "last.ckpt")])  # a file: as named
    assert (hit.path, hit.root, hit.why) == (run_folder / "checkpoints" / "last.ckpt", None, NAMED)
    assert hit.line() is None  # named by the user: nothing to announce


def test_old_zero_based_and_new_one_based_best_names_load(run_folder):
    for name in ("best-epoch000.ckpt", "best-epoch001.ckpt", "best-epoch012-v1.ckpt"):
        best = add_best(run_folder, name)
        assert "state_dict" in load_checkpoint(run_checkpoint(run_folder / "checkpoints")[0])
        best.unlink()


def test_the_file_used_is_printed_with_why(run_folder, tmp_path, capsys):
    best = add_best(run_folder, "best-epoch004.ckpt")
    assert newest_checkpoint(str(run_folder), "drawing") == best
    assert capsys.readouterr().out == f"checkpoint: {best} ({BEST_SO_FAR})\n"


@pytest.mark.parametrize("tool", ["extrapolate", "viz", "export"])
def test_each_tool_prints_the_file_it_used(run_folder, tmp_path, capsys, tool):
    best = add_best(run_folder, "best-epoch002.ckpt")
    write_status(run_folder, "complete", {}, best_checkpoint="checkpoints/best-epoch002.ckpt")
    args = {
        "extrapolate": (extrapolate_main, ["resolutions=[16]", "strategies=default", "device=cpu"]),
        "viz": (viz_main, []),
        "export": (export_main, ["format=torch_export"]),
    }
    main, extra = args[tool]
    out = tmp_path / ("model.pt2" if tool == "export" else "out")
    main([f"ckpt={run_folder}", f"out={out}", *extra])
    assert f"checkpoint: {best} ({REPORTED})" in capsys.readouterr().out.splitlines()


def test_the_tool_given_a_run_folder_prints_the_run_s_own_numbers(tmp_path, capsys):
    """A trained run: ``extrapolate ckpt=<run folder>`` scores the checkpoint metrics.json names and
    prints the accuracies the run reported at every size, even with a ``last.ckpt`` that scores
    otherwise (its weights scrambled here, so a tool that took it would print other numbers)."""
    overrides = [
        "data=shapes",
        "data.num_train=300",
        "data.num_test=64",
        "data.val_size=64",
        "model=vit_micro",
        "encoding=rope_2d",
        "eval.resolutions=[16,48]",
        "eval.test_subset=40",
        "trainer.max_epochs=2",
        "++trainer.limit_train_batches=2",
        "task.pictures=false",
        "trainer.enable_progress_bar=false",
    ]
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        train(compose("train", overrides=[f"run.root={tmp_path / 'runs'}", *overrides]))
    (status,) = (tmp_path / "runs").rglob("metrics.json")
    run, report = status.parent, json.loads(status.read_text())
    last = run / "checkpoints" / "last.ckpt"
    scrambled = torch.load(last, weights_only=True)
    torch.manual_seed(1)
    scrambled["state_dict"] = {k: torch.randn_like(v) if v.is_floating_point() else v
                               for k, v in scrambled["state_dict"].items()}  # fmt: skip
    torch.save(scrambled, last)
    capsys.readouterr()
    out = tmp_path / "out"
    assert extrapolate_main([f"ckpt={run}", "strategies=default", "device=cpu", f"out={out}"]) == 0
    printed = capsys.readouterr().out
    assert f"checkpoint: {run / report['best_checkpoint']} ({REPORTED})" in printed.splitlines()
    rows = {r.split(",")[3]: float(r.split(",")[5]) for r in (out / "extrapolation.csv").read_text().splitlines()[1:]}
    assert set(rows) == {"16", "48"}
    for size, acc in rows.items():
        assert acc == pytest.approx(report["metrics"][f"test/acc@res{size}"], abs=1e-9), size
