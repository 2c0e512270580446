"""The real Hydra config, composed as ``train.py`` does, run end to end."""

import pytest
import torch
from conftest import compose_train, require_cifar

from vitpos.encodings import list_encodings
from vitpos.errors import UserError
from vitpos.run.identity import run_dir
from vitpos.tasks.classification import ImageClassifier
from vitpos.train import train

SHAPES_TINY = ["data=shapes", "data.num_train=600", "data.num_test=128", "data.val_size=128", "model=vit_micro"]


def config(tmp_path, *overrides):
    return compose_train(f"run.root={tmp_path}", "trainer.enable_progress_bar=false", *overrides)


@pytest.mark.parametrize("name", list_encodings(2))
def test_fast_dev_run_for_every_image_encoding(tmp_path, name):
    metrics = train(config(tmp_path, f"encoding={name}", "debug=fast", *SHAPES_TINY))
    assert 0.0 <= metrics["test/acc"] <= 1.0
    assert {"test/acc@res24", "test/acc@res48"} <= set(metrics)


def test_cls_pooling_and_a_combination_from_the_command_line(tmp_path):
    cfg = config(
        tmp_path, "encoding=combo", "encoding.parts=[rope_2d,learned_2d]", "model.pool=cls", "debug=fast", *SHAPES_TINY
    )
    assert cfg.encoding.parts == ["rope_2d", "learned_2d"]
    assert 0.0 <= train(cfg)["test/acc"] <= 1.0


def test_short_run_writes_events_checkpoints_and_resumes(tmp_path):
    cfg = config(tmp_path, "encoding=rope_2d", "trainer.max_epochs=2", "eval.resolutions=[24]", *SHAPES_TINY)
    run = run_dir(cfg)  # runs/shapes/vit_micro/rope_2d-<hash>/seed0
    assert run.relative_to(tmp_path).parts[:2] == ("shapes", "vit_micro")
    # continuing another run: a 1-epoch run's last.ckpt (another folder: max_epochs is part of the
    # run's identity), its weights marked, passed as resume=PATH; the mark survives epoch 2
    short = config(tmp_path, "encoding=rope_2d", "trainer.max_epochs=1", "eval.resolutions=[24]", *SHAPES_TINY)
    assert run_dir(short) != run
    train(short)
    assert list(run_dir(short).glob("events.out.tfevents.*"))
    last = run_dir(short) / "checkpoints" / "last.ckpt"
    assert last.exists() and list(run_dir(short).glob("checkpoints/best-*.ckpt"))
    module = ImageClassifier.load_from_checkpoint(last, map_location="cpu")  # the model alone, from plain config
    assert module.model.pos.name == "rope_2d"
    assert module(torch.zeros(1, 3, 32, 32)).shape == (1, 4)
    state = torch.load(last, weights_only=True)
    first_step = state["global_step"]
    state["state_dict"]["model.head.bias"].fill_(1000.0)
    marked = tmp_path / "marked.ckpt"
    torch.save(state, marked)
    with pytest.raises(ValueError, match="trainer.max_epochs"):  # resume=auto: not this run's checkpoint
        (run / "checkpoints").mkdir(parents=True)
        torch.save(state, run / "checkpoints" / "last.ckpt")
        train(cfg)
    (run / "checkpoints" / "last.ckpt").unlink()
    two_epochs = ("encoding=rope_2d", "trainer.max_epochs=2", "eval.resolutions=[24]", *SHAPES_TINY)
    train(config(tmp_path, *two_epochs, f"resume={marked}"))
    resumed = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert resumed["global_step"] == 2 * first_step
    assert resumed["state_dict"]["model.head.bias"].min() > 900  # started from the checkpoint, not from scratch
    assert run_dir(config(tmp_path, "encoding=rope_2d", "model.depth=2", *SHAPES_TINY)) != run  # never shared
    with pytest.raises(UserError, match=r"resume=false but .* \(pass resume=auto"):
        train(config(tmp_path, *two_epochs, "resume=false"))


@pytest.mark.slow
def test_short_real_cifar10_run_is_clearly_above_chance(tmp_path):
    root = require_cifar()
    cfg = config(
        tmp_path,
        "debug=subset",
        "data.format=imagefolder",
        f"data.root={root}",
        "encoding=sincos_2d",
        "task.pictures=false",
    )
    metrics = train(cfg)
    print({k: round(v, 4) for k, v in metrics.items()})
    assert metrics["test/acc"] > 0.17  # chance is 0.10; this budget measured 0.22


def test_same_seed_same_run_on_cpu(tmp_path):
    states = []
    for root in ("a", "b"):
        cfg = config(
            tmp_path / root, "encoding=rope_2d_mixed", "trainer.max_epochs=1", "eval.resolutions=[]", *SHAPES_TINY
        )
        train(cfg)
        states.append(torch.load(run_dir(cfg) / "checkpoints" / "last.ckpt", weights_only=True))
    for name, value in states[0]["state_dict"].items():
        assert torch.equal(value, states[1]["state_dict"][name]), name


def test_mixup_and_cutmix_from_timm_train(tmp_path):
    cfg = config(tmp_path, "task.mixup=0.8", "task.cutmix=1.0", "debug=fast", *SHAPES_TINY)
    assert 0.0 <= train(cfg)["test/acc"] <= 1.0


def test_missing_cifar_stops_with_the_ways_out(tmp_path):
    from vitpos.data.cifar10 import DatasetNotFoundError

    cfg = config(tmp_path, f"data.root={tmp_path}/nothing", "data.download=false", "debug=fast")
    with pytest.raises(DatasetNotFoundError, match="data=shapes"):
        train(cfg)
