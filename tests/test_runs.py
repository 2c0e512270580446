"""Run identity (vitpos/run/identity.py): one folder per configuration."""

from conftest import CONFIGS
from hydra import compose, initialize_config_dir

from vitpos.run.identity import config_hash, model_name, run_dir


def folder(*overrides):
    with initialize_config_dir(str(CONFIGS), version_base="1.3"):
        return run_dir(compose("train", overrides=["run.root=runs", *overrides]))


def test_readable_layout():
    path = folder("data=shapes", "model=vit_micro", "encoding=rope_2d", "seed=3")
    assert path.parts[:4] == ("runs", "shapes", "vit_micro", path.parts[3])
    assert path.parts[3].startswith("rope_2d-") and len(path.parts[3]) == len("rope_2d-") + 6
    assert path.name == "seed3"


def test_same_command_same_folder_and_seeds_side_by_side():
    assert folder("encoding=rope_2d") == folder("encoding=rope_2d")
    assert folder("seed=0").parent == folder("seed=1").parent  # compare averages the seeds of one folder


def test_different_configurations_never_share_a_folder():
    variants = [
        [],
        ["debug=subset"],  # the README's debug step vs the full recipe: they used to collide
        ["model=vit_micro"],
        ["model.depth=6"],
        ["optim.lr=1e-3"],
        ["data.train_subset=1000"],
        ["data.format=imagefolder"],
        ["encoding.temperature=100.0"],
        ["encoding.strategy=interpolate"],
        ["task.label_smoothing=0.0"],
        ["trainer.max_epochs=5"],
    ]
    paths = [folder(*v) for v in variants]
    assert len(set(paths)) == len(paths), paths


def test_where_and_how_do_not_change_the_folder():
    base = folder()
    assert folder("data.root=/elsewhere") == base
    assert folder("trainer.enable_progress_bar=false", "task.pictures=false", "data.eval_batch_size=7") == base


def test_debug_runs_have_their_own_group():
    assert folder("debug=subset").parts[1] == "debug"
    assert folder("debug=fast").parts[1] == "debug"
    assert folder("debug=fast", "data=shapes") != folder("debug=fast")  # same group, other data: another hash


def test_model_name_from_the_configs_and_hash_order_free():
    with initialize_config_dir(str(CONFIGS), version_base="1.3"):
        cfg = compose("train", overrides=["model=vit_small"])
    assert model_name(cfg) == "vit_small"
    cfg.model.depth = 3
    assert model_name(cfg) == "custom"
    plain = {"model": {"a": 1, "b": 2}}
    assert config_hash(plain) == config_hash({"model": {"b": 2, "a": 1}})
