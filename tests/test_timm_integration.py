"""vitpos encodings in timm's VisionTransformer (vitpos/integrations/timm.py) and ``model=timm`` training.

The conversion keeps what the model computed where nothing changes (``learned_1d`` takes timm's
table over: the same logits), every image encoding runs forward and backward through a converted
model at a square and a non-square size, and ``train.py model=timm`` fine-tunes a timm state_dict
file, listing the keys that do not apply and refusing a file or model that does not fit.
"""

import pytest
import timm
import torch
from conftest import CONFIGS, compose_train, run_command
from omegaconf import OmegaConf

from vitpos.encodings import create_encoding, list_encodings
from vitpos.errors import UserError
from vitpos.integrations.timm import EncodedVisionTransformer, apply_encoding
from vitpos.integrations.timm_weights import create_vit
from vitpos.tasks.build import from_checkpoint
from vitpos.train import train

SMALL = dict(img_size=32, patch_size=4, depth=2, embed_dim=64, num_heads=4, num_classes=10)  # an 8x8 grid
KWARGS = ("patch_size", "depth", "embed_dim", "num_heads")  # SMALL as model.kwargs (vitpos sets the rest)


def timm_vit(**kw) -> torch.nn.Module:
    """A small timm ViT (8x8 patches of 4 px, 2 blocks, width 64) with a random, not tiny, pos_embed."""
    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, **{**SMALL, **kw})
    if model.pos_embed is not None:
        with torch.no_grad():
            model.pos_embed.normal_(std=0.5)  # large enough that dropping or misplacing a row shows
    return model.eval()


def encoding_config(config: str) -> tuple[str, dict]:
    """The encoding's name and options as ``train.py encoding=<config>`` composes them (``pape_ri`` is ``pape``
    with options; an encoding without a YAML file is its name at its defaults)."""
    options = OmegaConf.to_container(compose_train(f"encoding={config}").encoding)
    return options.pop("name"), options


#: every encoding config for images: each registered image encoding, and the presets of one (pape_ri); a
#: config file's ``name`` read as written (composing each at collection would cost every worker seconds)
IMAGE_CONFIGS = sorted(
    {p.stem for p in (CONFIGS / "encoding").glob("*.yaml") if OmegaConf.load(p).name in list_encodings(2)}
    | set(list_encodings(2))
)


@pytest.mark.parametrize(
    "kw",
    [
        {},  # class token; timm's table has its row (no_embed_class=False)
        {"global_pool": "avg", "class_token": False},  # no prefix token at all
        {"global_pool": "avg", "no_embed_class": True},  # class token outside the table
        {"reg_tokens": 2},  # class and register rows in the table
        {"reg_tokens": 2, "no_embed_class": True},
    ],
    ids=["cls", "avg-no-cls", "avg-no-embed-class", "registers", "registers-no-embed-class"],
)
def test_learned_1d_takes_the_table_over_and_the_logits_stay(kw):
    model = timm_vit(**kw)
    images = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        before = model(images)
    converted = apply_encoding(model, "learned_1d")
    assert converted is model and isinstance(model, timm.models.VisionTransformer)
    assert type(model) is EncodedVisionTransformer and model.pos_embed is None
    with torch.no_grad():
        after = model(images)
    torch.testing.assert_close(after, before, atol=1e-5, rtol=0)


def test_attention_maps_are_the_softmax_timm_computed():
    """``attention_maps`` (what vitpos.viz draws) of a model converted to ``learned_1d``: every block's
    attention equals the one timm's own Attention computes explicitly (``fused_attn=False``: the
    softmax goes through ``attn_drop``, where a hook reads it) before the conversion."""
    model = timm_vit(reg_tokens=1)
    timm_maps = []
    for blk in model.blocks:
        blk.attn.fused_attn = False
        blk.attn.attn_drop.register_forward_hook(lambda module, args, out: timm_maps.append(out.detach()))
    images = torch.randn(2, 3, 32, 32)  # the 8x8 grid of the table, after a class and a register token
    with torch.no_grad():
        model(images)
        maps = apply_encoding(model, "learned_1d").eval().attention_maps(images)
    assert len(maps) == len(timm_maps) == 2 and maps[0].shape == (2, 4, 2 + 64, 2 + 64)
    for ours, theirs in zip(maps, timm_maps):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)


def test_factorized_tables_keep_a_factorized_pos_embed_exactly():
    """learned_2d_sum holds rows[y] + cols[x]: a timm table of that form is carried exactly."""
    model = timm_vit(global_pool="avg", class_token=False)
    rows, cols = torch.randn(8, 1, 64), torch.randn(1, 8, 64)
    with torch.no_grad():
        model.pos_embed.copy_((rows + cols).reshape(1, 64, 64))  # (1, h*w, D)
        images = torch.randn(2, 3, 32, 32)
        before = model(images)
        after = apply_encoding(model, "learned_2d_sum")(images)
    torch.testing.assert_close(after, before, atol=1e-5, rtol=0)


def test_a_table_of_another_grid_is_resampled_by_the_encoding():
    """A 16x16 table (a checkpoint made at another size) on the 8x8 model: learned_1d's own resize."""
    model = timm_vit(global_pool="avg", class_token=False)
    table = torch.randn(1, 256, 64)  # (1, 16*16, D)
    model.pos_embed = torch.nn.Parameter(table.clone())
    apply_encoding(model, "learned_1d")
    source = create_encoding("learned_1d", dim=64, num_heads=4, grid=(16, 16))
    with torch.no_grad():
        source.table.copy_(table[0])
        expected = source.train().table_for((8, 8))  # (64, D)
    torch.testing.assert_close(model.pos.table.detach(), expected)


def test_every_sweep_encoding_composes_as_its_name():
    """Each encoding the shared sweep list names composes as ``encoding=<name>`` (with or without a YAML file)."""
    sweep = OmegaConf.load(CONFIGS / "sweep" / "image_encodings.yaml")["encoding"].split(",")
    assert set(sweep) <= set(IMAGE_CONFIGS)
    assert all(encoding_config(name)[0] == name for name in sweep)


@pytest.mark.parametrize("config", IMAGE_CONFIGS)
def test_every_image_encoding_trains_through_a_timm_vit_at_two_sizes(config):
    name, options = encoding_config(config)
    torch.manual_seed(0)
    model = apply_encoding(timm_vit(), name, **options).train()
    for size in ((32, 32), (16, 32)):  # the training grid 8x8, then 4x8
        model.zero_grad()
        logits = model(torch.randn(2, 3, *size))
        assert logits.shape == (2, 10) and torch.isfinite(logits).all(), size
        logits.square().mean().backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        assert grads and all(torch.isfinite(g).all() for g in grads), size
    assert model.blocks[0].attn.qkv.weight.grad is not None


def test_models_and_options_that_cannot_work_are_refused_untouched():
    resnet = timm.create_model("resnet18", pretrained=False, num_classes=10)
    with pytest.raises(UserError, match="ResNet is not a timm VisionTransformer"):
        apply_encoding(resnet, "rope_2d")
    model = timm_vit()
    with pytest.raises(UserError, match="unknown encoding 'rope_3d'.*valid: .*rope_2d_mixed"):
        apply_encoding(model, "rope_3d")
    with pytest.raises(UserError, match="works on sequence grids"):
        apply_encoding(model, "alibi")
    with pytest.raises(UserError, match="encoding.base"):
        apply_encoding(model, "rope_2d", base=-1.0)
    qk_norm = timm_vit(qk_norm=True)
    with pytest.raises(UserError, match="q/k norms.*qk_norm=False"):
        apply_encoding(qk_norm, "rope_2d")
    assert type(model) is timm.models.VisionTransformer and model.pos_embed is not None  # left as it was
    apply_encoding(model, "rope_2d")
    with pytest.raises(UserError, match="already converted"):
        apply_encoding(model, "rope_2d")


def test_create_vit_reads_data_img_size_by_the_one_rule_of_sizes(monkeypatch):
    """``data.img_size`` as the task passes it (Hydra's ListConfig for ``[16,32]``) reaches timm as a
    plain ``(h, w)``; a side as ``(s, s)``; a malformed one is refused naming ``data.img_size``, not
    blamed on ``model.kwargs`` by timm's error."""
    seen = []
    create = timm.create_model
    monkeypatch.setattr(timm, "create_model", lambda *a, **kw: seen.append(kw.get("img_size")) or create(*a, **kw))
    model_cfg = OmegaConf.create({"name": "vit_tiny_patch16_224", "kwargs": {k: SMALL[k] for k in KWARGS}})
    data = OmegaConf.create({"img_size": [16, 32], "side": 24, "bad": [16]})
    model = create_vit(model_cfg, 10, data.img_size)
    assert seen[-1] == (16, 32) and type(seen[-1]) is tuple  # not the ListConfig itself
    assert tuple(model.patch_embed.grid_size) == (4, 8) and model.pos_embed.shape == (1, 1 + 32, 64)
    create_vit(model_cfg, 10, data.side)
    assert seen[-1] == (24, 24)
    with pytest.raises(UserError, match=r"^data.img_size: \[16\] is not a size"):
        create_vit(model_cfg, 10, data.bad)


# ------------------------------------------------------------------------------- train.py model=timm
RUN = [
    "data=shapes", "data.num_train=512", "data.val_size=128", "data.num_test=128", "data.batch_size=64",
    "trainer.max_epochs=1", "trainer.precision=32-true", "trainer.enable_progress_bar=false",
    "task.ema_decay=0", "eval.test_subset=64",
]  # fmt: skip
TINY = ["model=timm", "model.name=vit_tiny_patch16_224"]


def state_dict_file(path, **kw):
    """A timm vit_tiny_patch16_224's state_dict (224 px: a 14x14 table, 1000 classes) saved at ``path``."""
    torch.manual_seed(0)
    torch.save(timm.create_model("vit_tiny_patch16_224", pretrained=False, **kw).state_dict(), path)
    return path


@pytest.mark.slow
def test_train_py_fine_tunes_a_timm_state_dict_and_lists_what_it_skips(tmp_path):
    ckpt = state_dict_file(tmp_path / "vit_tiny.pth")
    args = [*TINY, f"model.checkpoint={ckpt}", "encoding=rope_2d_mixed", *RUN, "eval.resolutions=[16,48]"]
    ran = run_command("train.py", *args, f"run.root={tmp_path / 'runs'}", cwd=tmp_path)
    assert ran.code == 0, ran.out + ran.err
    lines = [line for line in ran.out.splitlines() if line.startswith(f"model.checkpoint={ckpt}:")]
    assert len(lines) == 1, ran.out
    for skipped in ("head.weight (1000 classes in the file, 4 here)", "head.bias", "pos_embed (encoding rope_2d_mixed"):
        assert skipped in lines[0].split("skipped: ")[1], lines[0]
    assert "loaded 149 tensors" in lines[0]  # everything else of vit_tiny: 152 tensors in the file
    (last,) = (tmp_path / "runs").glob("shapes/timm/rope_2d_mixed-*/seed0/checkpoints/last.ckpt")
    ckpt.unlink()  # a run's own checkpoint holds every weight: the timm file is not read again
    module, _, cfg = from_checkpoint(last)
    assert cfg["model"]["geometry"]["patch_size"] == 16
    assert module.encoding.name == "rope_2d_mixed" and module(torch.zeros(1, 3, 32, 48)).shape == (1, 4)
    viz = run_command("vitpos.viz", f"ckpt={last}", f"out={tmp_path / 'viz'}", "n_images=2", cwd=tmp_path)
    assert viz.code == 0 and (tmp_path / "viz" / "attn_maps.png").is_file(), viz.out + viz.err  # the next: command


@pytest.mark.slow
def test_a_converted_timm_vit_learns_shapes_in_one_epoch(tmp_path):
    """16x16 shapes, 4x4 patches: where the red square is, from positions the encoding gives."""
    small = "model.kwargs={patch_size:4,depth:2,embed_dim:64,num_heads:4}"
    cfg = compose_train(
        f"run.root={tmp_path}", *TINY, small, "encoding=rope_2d_mixed", *RUN, "data.img_size=16",
        "data.num_train=12000", "data.num_test=1000", "optim.lr=2e-3", "optim.warmup_epochs=0.2",
        "eval.resolutions=[]", "task.pictures=false",
    )  # fmt: skip
    acc = train(cfg)["test/acc"]
    assert acc > 0.6, f"chance is 0.25 (encoding=none: 0.25), got {acc:.3f}"  # rope_2d_mixed: 0.96


def assert_refused(ran, needle: str, tmp_path, keep=()) -> None:
    """Exit code 2, one ``error:`` line holding ``needle``, and nothing written."""
    errors = [line for line in ran.err.splitlines() if line.startswith("error: ")]
    assert ran.code == 2 and len(errors) == 1 and needle in errors[0], ran.out + ran.err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(keep), "a run folder was written"


def test_a_model_that_is_not_a_vision_transformer_is_refused(tmp_path):
    ran = run_command(
        "train.py", "model=timm", "model.name=resnet18", *RUN, f"run.root={tmp_path / 'runs'}", cwd=tmp_path
    )
    assert_refused(ran, "model.name: resnet18: ResNet is not a timm VisionTransformer", tmp_path)


def test_a_checkpoint_of_another_width_is_refused(tmp_path):
    ckpt = state_dict_file(tmp_path / "wide.pth", embed_dim=96, depth=1, num_heads=3)
    args = [*TINY, f"model.checkpoint={ckpt}", "eval.resolutions=[16]", *RUN, f"run.root={tmp_path / 'runs'}"]
    ran = run_command("train.py", *args, cwd=tmp_path)
    assert_refused(ran, "model.checkpoint:", tmp_path, keep=["wide.pth"])
    assert "(1, 1, 96) in the file, (1, 1, 192) in this model" in ran.err


def test_the_timm_model_gives_the_geometry_the_size_checks_read(tmp_path):
    ran = run_command("train.py", *TINY, *RUN, "eval.resolutions=[24]", f"run.root={tmp_path / 'runs'}", cwd=tmp_path)
    assert_refused(ran, "eval.resolutions[0]", tmp_path)
    assert "model.patch_size=16" in ran.err  # vit_tiny_patch16_224's patches, read from the timm model
