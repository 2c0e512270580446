"""What a refused checkpoint file is called, and which run a timm checkpoint file starts.

Every file that ``ckpt=``, ``resume=`` or ``model.checkpoint`` names is read by one loader
(:mod:`vitpos.safe_load`, ``weights_only=True``), and each way it refuses a file is one line that
says what the file is: a plain pickle is not called tampered with, torch's warnings are not
printed, and a crafted ``model.checkpoint`` gets no advice to retry with ``weights_only=False``.
A ``model=timm`` run is identified by the content of its ``model.checkpoint`` file, not its path:
other weights saved over the same file train a new run, the same file moved finds the old one.
"""

from __future__ import annotations

import pickle
import shutil
import warnings

import pytest
import timm
import torch
import yaml
from ckpt_factory import RunsCode
from conftest import compose_train, run_command

from vitpos.integrations.timm_weights import read_checkpoint
from vitpos.run.identity import checkpoint_digest, record, run_dir
from vitpos.safe_load import NotLoadable, load_weights_only

#: a timm ViT of one block, width 32, 4 px patches on 16 px shapes (4 classes): seconds to train
TIMM = [
    "model=timm", "model.name=vit_tiny_patch16_224", "model.kwargs={patch_size:4,depth:1,embed_dim:32,num_heads:2}",
    "data=shapes", "data.img_size=16",
]  # fmt: skip
TINY_RUN = [
    "data.num_train=64", "data.val_size=32", "data.num_test=32", "data.batch_size=32", "data.eval_batch_size=32",
    "eval.test_subset=32", "eval.resolutions=[]", "trainer.max_epochs=1", "trainer.precision=32-true",
    "trainer.enable_progress_bar=false", "task.pictures=false", "task.ema_decay=0", "threads=1",
]  # fmt: skip


def timm_weights(path, seed: int = 0):
    """The state dict of the model :data:`TIMM` makes, initialised with ``seed``, saved at ``path``."""
    torch.manual_seed(seed)
    model = timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, patch_size=4, depth=1, embed_dim=32, num_heads=2, img_size=16,
        num_classes=4,
    )  # fmt: skip
    torch.save(model.state_dict(), path)
    return path


def plain_pickle(path, protocol: int = 4):
    """A harmless ``{'a': 1}`` written by ``pickle.dump``, not by torch.save."""
    with open(path, "wb") as f:
        pickle.dump({"a": 1}, f, protocol=protocol)
    return path


def one_error(ran, *needles: str) -> str:
    """Exit code 2, nothing but one ``error:`` line on stderr, holding every needle."""
    assert ran.code == 2, ran.out + ran.err
    lines = ran.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), ran.out + ran.err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def no_torch_warning(command):
    """``command()``'s result; fails if torch warned (about the pickle protocol) while it ran."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = command()
    assert not [str(w.message) for w in caught if "pickle" in str(w.message)], [str(w.message) for w in caught]
    return result


# ------------------------------------------------------------ a plain pickle as ckpt=
@pytest.mark.parametrize(
    "tool, argv",
    [
        ("vitpos.extrapolate", ["out=out"]),
        ("vitpos.viz", ["out=out"]),
        ("vitpos.export", ["out=out/model.onnx"]),
    ],
)
@pytest.mark.parametrize("protocol", [2, 4])
def test_a_plain_pickle_is_called_one_not_a_tampered_file(tmp_path, tool, argv, protocol):
    plain_pickle(tmp_path / "plain.pkl", protocol)
    ran = no_torch_warning(lambda: run_command(tool, "ckpt=plain.pkl", *argv, cwd=tmp_path))
    line = one_error(
        ran,
        "error: ckpt=plain.pkl: not a PyTorch checkpoint: a plain pickle, which the safe loader does not read; "
        "pass a .ckpt written by a vitpos run",
    )
    assert "tampered" not in line and "run any code" not in line and "weights_only" not in line
    assert ran.out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.pkl"]  # no out folder


def test_a_torch_file_of_a_newer_pickle_protocol_is_named_by_it(tmp_path):
    """``torch.save(..., pickle_protocol=4)``: a PyTorch file, not a crafted one; the opcode the
    restricted unpickler stops on (FRAME) and the protocol that brought it are named."""
    torch.save({"state_dict": {}}, tmp_path / "p4.ckpt", pickle_protocol=4)
    ran = no_torch_warning(lambda: run_command("vitpos.extrapolate", "ckpt=p4.ckpt", cwd=tmp_path))
    line = one_error(ran, "ckpt=p4.ckpt: a PyTorch file whose pickle uses the opcode FRAME (pickle protocol 4)")
    assert "tampered" not in line and "run any code" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p4.ckpt"]


def test_the_legacy_torch_format_still_loads(tmp_path):
    """A pickle that starts with torch's magic number is torch.save's own legacy format, not a plain pickle."""
    path = tmp_path / "legacy.pt"
    torch.save({"w": torch.ones(2)}, path, _use_new_zipfile_serialization=False)
    assert torch.equal(load_weights_only(path)["w"], torch.ones(2))
    plain_pickle(tmp_path / "plain.pkl", protocol=2)
    with pytest.raises(NotLoadable, match="a plain pickle") as refused:
        load_weights_only(tmp_path / "plain.pkl")
    assert not refused.value.crafted


# ------------------------------------------------------------ model.checkpoint
def test_a_crafted_model_checkpoint_gets_no_advice_to_run_it(tmp_path):
    marker = tmp_path / "pwned"
    torch.save({"pos_embed": RunsCode(marker)}, tmp_path / "evil.pth")
    ran = run_command("train.py", *TIMM, "model.checkpoint=evil.pth", "run.root=runs", cwd=tmp_path)
    line = one_error(
        ran,
        "error: model.checkpoint: evil.pth: refused: it holds Python objects that only an unrestricted unpickler "
        "would build (GLOBAL posix.system)",
        "(pass a state dict saved with torch.save(model.state_dict(), PATH), or a .safetensors file; "
        "do NOT load this one with weights_only=False",
    )
    for advice in ("trusted", "retry", "Re-running", "will likely succeed"):
        assert advice not in line, line
    assert not marker.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.pth"]  # no run folder


def test_a_plain_pickle_as_model_checkpoint_is_called_one(tmp_path):
    plain_pickle(tmp_path / "w.pkl")
    ran = no_torch_warning(lambda: run_command("train.py", *TIMM, "model.checkpoint=w.pkl", cwd=tmp_path))
    line = one_error(
        ran,
        "error: model.checkpoint: w.pkl: not a PyTorch checkpoint: a plain pickle, which the safe loader does not "
        "read (pass a state dict saved with torch.save(model.state_dict(), PATH), or a .safetensors file)",
    )
    assert "weights_only" not in line and "tampered" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.pkl"]


def test_a_timm_training_checkpoint_gives_its_ema_weights(tmp_path):
    """timm's reader, as before: the EMA weights where the file has them, wrapper prefixes removed."""
    weights = torch.load(timm_weights(tmp_path / "w.pth"), weights_only=True)
    ema = {f"module.{k}": v + 1 for k, v in weights.items()}
    torch.save({"state_dict": weights, "state_dict_ema": ema, "epoch": 3}, tmp_path / "train.pth")
    state = read_checkpoint(tmp_path / "train.pth")
    assert state.keys() == weights.keys() and torch.equal(state["pos_embed"], weights["pos_embed"] + 1)


# ------------------------------------------------------------ the run of a model.checkpoint
def test_the_run_folder_follows_the_weights_not_the_path(tmp_path):
    timm_weights(tmp_path / "w.pth", seed=0)
    cfg = compose_train(*TIMM, f"model.checkpoint={tmp_path / 'w.pth'}", "run.model=timm")
    first = run_dir(cfg)
    timm_weights(tmp_path / "w.pth", seed=1)  # other weights over the same file: another run
    assert run_dir(cfg) != first
    shutil.move(tmp_path / "w.pth", tmp_path / "moved.pth")  # the same weights elsewhere: the same run
    moved = compose_train(*TIMM, f"model.checkpoint={tmp_path / 'moved.pth'}", "run.model=timm")
    second = run_dir(moved)
    assert second != first and second.parent.parent == first.parent.parent
    record(moved)
    assert moved.run.checkpoint_digest == checkpoint_digest(tmp_path / "moved.pth")
    (tmp_path / "moved.pth").unlink()  # the saved config names its folder without the file
    assert run_dir(moved) == second


def test_a_run_without_model_checkpoint_records_no_digest():
    cfg = compose_train("data=shapes", "run.model=vit_micro")
    before = run_dir(cfg)
    record(cfg)
    assert "checkpoint_digest" not in cfg.run and run_dir(cfg) == before


@pytest.mark.slow
def test_other_weights_saved_over_model_checkpoint_train_a_new_run(tmp_path):
    """The user's sequence: train from w.pth, save other weights over w.pth, run the same command."""
    command = [*TIMM, "model.checkpoint=w.pth", *TINY_RUN, "run.root=runs"]
    timm_weights(tmp_path / "w.pth", seed=0)
    first = run_command("train.py", *command, cwd=tmp_path)
    assert first.code == 0, first.out + first.err
    timm_weights(tmp_path / "w.pth", seed=1)
    second = run_command("train.py", *command, cwd=tmp_path)
    assert second.code == 0, second.out + second.err
    assert "finished earlier" not in second.out and "nothing trained" not in second.out, second.out
    runs = sorted((tmp_path / "runs" / "shapes" / "timm").glob("*/seed0"))
    assert len(runs) == 2 and all((run / "metrics.json").is_file() for run in runs), runs
    digests = {yaml.safe_load((run / "hparams.yaml").read_text())["cfg"]["run"]["checkpoint_digest"] for run in runs}
    assert checkpoint_digest(tmp_path / "w.pth") in digests and len(digests) == 2
    shutil.move(tmp_path / "w.pth", tmp_path / "moved.pth")  # the same weights under another name: found again
    moved = [a.replace("model.checkpoint=w.pth", "model.checkpoint=moved.pth") for a in command]
    third = run_command("train.py", *moved, cwd=tmp_path)
    assert third.code == 0 and "finished earlier" in third.out, third.out + third.err
    assert len(list((tmp_path / "runs" / "shapes" / "timm").glob("*/seed0"))) == 2
