"""``eval.resolutions=auto``, the default: the sizes the run is tested at after training follow the
model's patch size (a timm model's too), around the training size: 0.5, 0.75, 1, 1.25, 1.5 and
2 x ``data.img_size`` in multiples of the patch. For 4 px patches at 32 px that is the list the
configs always gave, [16, 24, 32, 40, 48, 64]; a list given is still checked and refused with
the option's name when the patches do not tile it."""

import json
from pathlib import Path

import pytest
from conftest import compose_train, run_command

from vitpos.run.identity import run_dir
from vitpos.sizes import default_resolutions
from vitpos.train import train
from vitpos.validate import validate

SHAPES = ["data=shapes", "data.num_train=256", "data.val_size=64", "data.num_test=64"]
TIMM = ["model=timm", "model.name=vit_tiny_patch16_224", "encoding=rope_2d_mixed"]  # configs/model/timm.yaml's


def checked(*overrides: str) -> list:
    """``eval.resolutions`` of the composed config once the check filled it in."""
    cfg = compose_train(*overrides)
    validate(cfg)
    return list(cfg.eval.resolutions)


def test_the_rule_rounds_each_ratio_to_a_multiple_of_the_patch():
    assert default_resolutions(32, 4) == [16, 24, 32, 40, 48, 64]
    assert default_resolutions(32, 16) == [16, 32, 48, 64]  # 24 and 40 round (halves up) onto 32 and 48
    assert default_resolutions(224, 16) == [112, 176, 224, 288, 336, 448]
    assert default_resolutions([16, 32], 4) == [[8, 16], [12, 24], [16, 32], [20, 40], [24, 48], [32, 64]]
    assert default_resolutions(16, 16) == [16, 32]  # never below one patch


@pytest.mark.parametrize("model", ["vit_micro", "vit_cpu"])
def test_four_pixel_patches_keep_the_list_the_configs_gave(model):
    assert checked("data=shapes", f"model={model}") == [16, 24, 32, 40, 48, 64]


def test_the_default_changes_no_run_folder():
    """The committed runs were made with the list written out: the same command names the same folder."""
    given = ["data=shapes", "model=vit_micro", "eval.resolutions=[16,24,32,40,48,64]"]
    assert run_dir(compose_train("data=shapes", "model=vit_micro")) == run_dir(compose_train(*given))


def test_a_timm_model_with_16_pixel_patches_gets_multiples_of_16():
    sizes = checked("data=shapes", *TIMM)
    assert sizes == [16, 32, 48, 64] and all(size % 16 == 0 for size in sizes)


def test_a_list_given_stays_as_written():
    assert checked("data=shapes", *TIMM, "eval.resolutions=[[16,32],48]") == [[16, 32], 48]
    assert checked("data=shapes", "model=vit_micro", "eval.resolutions=[]") == []


def test_the_timm_command_of_the_model_config_trains_and_tests_its_default_sizes(tmp_path):
    """configs/model/timm.yaml's command (timm's initialisation: no checkpoint file) at a tiny scale,
    through ``python train.py``: it used to stop at ``eval.resolutions[1]: 24 is not a multiple of
    model.patch_size=16``."""
    tiny = ["trainer.max_epochs=1", "++trainer.limit_train_batches=1", "++trainer.limit_val_batches=1",
            "data.batch_size=16", "eval.test_subset=16", "task.pictures=false",
            "trainer.enable_progress_bar=false"]  # fmt: skip
    ran = run_command("train.py", *TIMM, *SHAPES, *tiny, f"run.root={tmp_path / 'runs'}", cwd=tmp_path)
    assert ran.code == 0, ran.out + ran.err
    (status,) = (tmp_path / "runs").rglob("metrics.json")
    metrics = json.loads(status.read_text())["metrics"]
    assert {k for k in metrics if k.startswith("test/acc@")} == {f"test/acc@res{s}" for s in (16, 32, 48, 64)}


IMAGE_MODELS = sorted(
    p.stem for p in (Path(__file__).parents[1] / "configs" / "model").glob("*.yaml") if p.stem != "seq_small"
)


@pytest.mark.parametrize("debug", ["fast", "subset"])
@pytest.mark.parametrize("model", IMAGE_MODELS)
def test_the_debug_configs_take_their_sizes_from_any_models_patch(debug, model):
    """``debug=fast`` and ``debug=subset`` write no pixel sizes of their own: with every image model
    config, the 16 px patches of configs/model/timm.yaml's ViT included, the check passes and each
    size is a multiple of the patch."""
    overrides = [*TIMM] if model == "timm" else [f"model={model}"]
    cfg = compose_train("data=shapes", f"debug={debug}", *overrides)
    assert cfg.model.get("name", "") == "vit_tiny_patch16_224" or model != "timm"  # the command line's model
    validate(cfg)
    patch = 16 if model == "timm" else cfg.model.patch_size  # vit_tiny_patch16_224
    assert cfg.eval.resolutions and all(size % patch == 0 for size in cfg.eval.resolutions)


@pytest.mark.slow
def test_debug_fast_trains_a_timm_model_with_16_pixel_patches(tmp_path):
    """configs/model/timm.yaml's ViT (patch 16, timm's initialisation) under ``debug=fast``: one batch
    of training, validation and test, then one test batch at each of its sizes."""
    cfg = compose_train(
        f"run.root={tmp_path}", "debug=fast", *TIMM, *SHAPES, "data.batch_size=16", "task.pictures=false"
    )
    metrics = train(cfg)
    assert 0.0 <= metrics["test/acc"] <= 1.0
    assert {k for k in metrics if k.startswith("test/acc@")} == {f"test/acc@res{s}" for s in (16, 32, 48, 64)}
