"""``python -m vitpos.extrapolate`` on real checkpoints: images and sequences in one call each."""

import csv

from conftest import CONFIGS
from hydra import compose, initialize_config_dir

from vitpos.extrapolate_cli import main
from vitpos.train import train

QUIET = ["trainer.max_epochs=1", "task.pictures=false", "trainer.enable_progress_bar=false"]
IMAGES = ["data=shapes", "data.num_train=300", "data.num_test=64", "data.val_size=64", "model=vit_micro",
          "eval.resolutions=[]"]  # fmt: skip
SEQUENCES = ["task=sequence", "data.num_train=200", "data.num_val=32", "data.num_test=32",
             "data.num_length_test=16", "eval.lengths=[]"]  # fmt: skip


def run(tmp_path, *overrides):
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        train(compose("train", overrides=[f"run.root={tmp_path}", *QUIET, *overrides]))


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_several_image_checkpoints_in_one_table_and_plot(tmp_path, capsys):
    run(tmp_path, "encoding=rope_2d", *IMAGES)
    run(tmp_path, "encoding=learned_1d", *IMAGES)
    out = tmp_path / "report"
    main([f"ckpt={tmp_path}/shapes", "resolutions=[16,32,48]", "strategies=all", f"out={out}", "device=cpu"])
    rows = read(out / "extrapolation.csv")
    assert {r["run"] for r in rows} == {"rope_2d/seed0", "learned_1d/seed0"}
    assert {r["strategy"] for r in rows if r["run"] == "rope_2d/seed0"} == {
        "extrapolate", "interpolate", "ntk", "dynamic", "yarn"}  # fmt: skip
    assert {int(r["size"]) for r in rows} == {16, 32, 48}
    at32 = {float(r["acc"]) for r in rows if r["run"] == "rope_2d/seed0" and r["size"] == "32"}
    assert len(at32) == 1  # every strategy is the identity at the training resolution
    assert (out / "extrapolation.png").stat().st_size > 0
    assert "rope_2d/seed0" in capsys.readouterr().out


def test_sequence_checkpoint_by_length(tmp_path):
    run(tmp_path, "encoding=alibi", *SEQUENCES)
    out = tmp_path / "report"
    main([f"ckpt={tmp_path}/seq_copy/alibi/seed0/checkpoints/last.ckpt", "lengths=[32,128]", f"out={out}"])
    rows = read(out / "extrapolation.csv")
    assert [(r["kind"], r["size"]) for r in rows] == [("len", "32"), ("len", "128")]
