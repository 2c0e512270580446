"""``vitpos.viz``: every picture for every registered encoding, and the math the pictures claim."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from vitpos import viz
from vitpos.encodings import EncodingContext, create_encoding, list_encodings
from vitpos.models import VisionTransformer
from vitpos.viz.__main__ import main as viz_main

SMALL = {"img_size": 16, "patch_size": 4, "dim": 32, "depth": 2, "num_heads": 2}  # a 4x4 grid
ABS, ROPE, MIXED, BIAS = {"pos/similarity", "pos/table"}, {"pos/rope_logit"}, {"pos/rope_mixed_freqs"}, {"pos/bias"}
EXPECTED = {  # encoding -> pictures of the encoding itself; new encodings are checked for images only
    "none": set(), "cpe": set(), "learned_1d": ABS, "learned_2d": ABS, "sincos_1d": ABS, "sincos_2d": ABS,
    "rope_1d": ROPE, "rope_1d_learned": ROPE, "rope_2d": ROPE, "rope_2d_mixed": ROPE | MIXED,
    "rel_bias_2d": BIAS, "combo": ABS | ROPE | MIXED,
}  # fmt: skip


def images(n=3, size=16):
    return torch.randn(n, 3, size, size, generator=torch.Generator().manual_seed(0))


def check_image(img):
    assert isinstance(img, np.ndarray) and img.dtype == np.uint8
    assert img.ndim == 3 and img.shape[2] == 3 and min(img.shape[:2]) >= 200
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 10  # something was drawn


class Figures:
    """Stands in for ``to_image`` in the picture modules: keeps each figure, draws none. Every kind
    of picture is drawn on the screen by the encodings of :data:`EXPECTED`; the others build the
    same figures from their own numbers (checked finite below), so their figures are checked for
    content without paying for the raster of each (most of a picture's time)."""

    def __init__(self):
        self.figures = []

    def __call__(self, fig):
        self.figures.append(fig)
        return fig


@pytest.mark.parametrize("name", list_encodings(2))
def test_pictures_for_every_image_encoding(name, monkeypatch):
    drawn = name in EXPECTED  # every kind of picture is among theirs
    if not drawn:
        for module in (viz.attention, viz.encoding):
            monkeypatch.setattr(module, "to_image", Figures())
    torch.manual_seed(0)
    model = VisionTransformer(name, **SMALL)
    model.train()
    pics = viz.pictures_for(model, images())
    assert model.training  # mode restored
    assert {"attn/maps", "attn/distance"} <= set(pics)
    if name in EXPECTED:
        assert set(pics) - {"attn/maps", "attn/distance"} == EXPECTED[name]
    for img in pics.values():
        if drawn:
            check_image(img)
        else:  # a figure with panels, each showing an image or a plot of finite numbers
            assert img.axes and all(ax.images or ax.lines or ax.collections or ax.patches for ax in img.axes)
            arrays = [np.ma.asarray(im.get_array(), dtype=float) for ax in img.axes for im in ax.images]
            assert all(np.isfinite(a.compressed()).all() for a in arrays)  # masked cells are left blank


@pytest.mark.parametrize("pool", ["gap", "cls"])
@pytest.mark.parametrize("name", list_encodings(2))
def test_picture_numbers_are_finite(name, pool):
    """The numbers behind each picture, on the training grid and on a larger non-square one."""
    torch.manual_seed(0)
    model = VisionTransformer(name, pool=pool, **SMALL)
    hooks = viz.hooks_of(model.pos)
    for grid in [(4, 4), (5, 6)]:
        if "add_to_tokens" in hooks:
            assert np.isfinite(viz.position_similarity_data(model, grid)).all()
            assert viz.position_similarity_data(model, grid).shape == (*grid, *grid)
        if "rotate_qk" in hooks:
            logits = viz.rope_logit_data(model, grid, block=1, vector="random", samples=4)
            assert logits.shape == (2, 2 * grid[0] - 1, 2 * grid[1] - 1) and np.isfinite(logits).all()
        if "attention_bias" in hooks:
            bias = viz.bias_data(model, grid, block=1)
            assert bias.shape == (2, *grid) and np.isfinite(bias).all()
    x = images(2, size=20)  # a 5x5 grid: beyond the training grid
    attn, who = viz.attention_maps_data(model, x)
    assert attn.shape == (2, 2, 5, 5) and np.isfinite(attn).all()
    assert who == ("class token" if pool == "cls" else "center patch")
    assert (attn.sum((-2, -1)) <= 1 + 1e-5).all()
    dist = viz.attention_distance_data(model, x)
    assert dist.shape == (2, 2) and np.isfinite(dist).all() and (dist > 0).all()


@pytest.mark.parametrize("name", list_encodings(1))
def test_pictures_of_sequence_encodings(name):
    """The encoding pictures on a 1D grid (the sequence side's encodings)."""
    options = {"parts": ["rope_1d", "learned_1d"]} if name == "combo" else {}
    pe = create_encoding(name, EncodingContext(dim=32, num_heads=2, depth=2, grid=(12,)), **options)
    for img in viz.pictures_for(pe).values():
        check_image(img)
    if "attention_bias" in viz.hooks_of(pe):
        assert viz.bias_data(pe).shape == (2, 12)
    if "rotate_qk" in viz.hooks_of(pe):
        assert viz.rope_logit_data(pe).shape == (2, 23)


def test_pictures_for_a_sequence_model_ignore_its_tokens():
    from vitpos.models.seq_transformer import SequenceTransformer

    model = SequenceTransformer("rope_1d", dim=32, depth=2, num_heads=2, max_len=12)
    assert set(viz.pictures_for(model, torch.randint(0, 17, (2, 12)))) == {"pos/rope_logit"}


def test_pictures_that_do_not_apply_say_so():
    rope, sincos = VisionTransformer("rope_2d", **SMALL), VisionTransformer("sincos_2d", **SMALL)
    with pytest.raises(ValueError, match="absolute encodings"):
        viz.position_similarity(rope)
    with pytest.raises(ValueError, match="rope_"):
        viz.rope_logit_vs_offset(sincos)
    with pytest.raises(ValueError, match="attention bias"):
        viz.bias_vs_offset(rope)
    with pytest.raises(ValueError, match="rope_2d_mixed"):
        viz.rope_mixed_directions(rope)


def test_sincos_2d_similarity_peaks_at_the_position_itself():
    pe = create_encoding("sincos_2d", EncodingContext(dim=64, num_heads=2, depth=1, grid=(8, 8)))
    sim = viz.position_similarity_data(pe)  # (8, 8, 8, 8)
    for i in range(8):
        for j in range(8):
            tile = sim[i, j]
            assert np.unravel_index(tile.argmax(), tile.shape) == (i, j)
            assert tile[i, j] == pytest.approx(1.0, abs=1e-5)
            assert np.sort(tile.flatten())[-2] < 1 - 1e-3  # no other position looks the same
    assert sim[0, 0, 0, 1] > sim[0, 0, 0, 7]  # neighbours are more similar than far positions


def test_rope_2d_logit_is_largest_at_offset_zero_and_falls_off():
    pe = create_encoding("rope_2d", EncodingContext(dim=192, num_heads=3, depth=1, grid=(8, 8)))
    logits = viz.rope_logit_data(pe)  # (H, 15, 15), offset 0 at [7, 7]
    dy, dx = np.meshgrid(np.arange(15) - 7, np.arange(15) - 7, indexing="ij")
    r = np.hypot(dy, dx)
    for head in logits:
        assert head[7, 7] == pytest.approx(head.max()) and (head == head.max()).sum() == 1
        ring_means = [head[(r >= a) & (r < b)].mean() for a, b in [(0, 0.5), (0.5, 2), (2, 4), (4, 6), (6, 11)]]
        assert all(a > b for a, b in itertools.pairwise(ring_means)), ring_means
    assert logits[0, 7, 7] == pytest.approx(192 / 3 * (192 / 3) ** -0.5)  # q.k/sqrt(Dh) = Dh/sqrt(Dh) at offset 0


def test_rel_bias_picture_reads_the_center_row():
    model = VisionTransformer("rel_bias_2d", pool="cls", **SMALL)
    bias = model.pos.attention_bias((4, 4), 0, torch.device("cpu"), torch.float32)  # (H, 1 + 16, 1 + 16)
    center = 1 + 2 * 4 + 2
    np.testing.assert_allclose(viz.bias_data(model), bias[:, center, 1:].reshape(2, 4, 4).detach().numpy())


def test_uniform_attention_has_the_mean_pairwise_distance():
    model = VisionTransformer("none", **SMALL)
    for blk in model.encoder.blocks:  # q = k = 0: every query attends uniformly
        torch.nn.init.zeros_(blk.attn.qkv.weight)
        torch.nn.init.zeros_(blk.attn.qkv.bias)
    c = torch.cartesian_prod(torch.arange(4.0), torch.arange(4.0))
    dist, img = viz.mean_attention_distance(model, images())
    np.testing.assert_allclose(dist, torch.cdist(c, c).mean().item(), rtol=1e-5)
    check_image(img)


def test_cli_on_a_fresh_model(tmp_path, capsys):
    args = [f"{k}={v}" for k, v in SMALL.items()] + ["encoding=rope_2d_mixed", f"out={tmp_path}", "n_images=2"]
    assert viz_main(args) == 0
    assert "random images" in capsys.readouterr().out
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(
        ["attn_distance.csv", "attn_distance.png", "attn_maps.png", "pos_rope_logit.png", "pos_rope_mixed_freqs.png"]
    )
    with pytest.raises(ValueError, match="bogus: unknown option"):  # vitpos.validate.UserError: exit 2 on the CLI
        viz_main(["encoding=rope_2d", "bogus=1"])
    with pytest.raises(ValueError, match=r"blocks=\[9\]: the model has blocks 0..1 \(pass blocks=all or \[0,1\]\)"):
        viz_main([*args, "blocks=[9]"])
    with pytest.raises(ValueError, match="n_images: expected an integer, got 'two' \\(e.g. n_images=4\\)"):
        viz_main([*args, "n_images=two"])


def test_cli_on_a_checkpoint(tmp_path, capsys):
    import lightning

    from vitpos.tasks import classification

    cfg = {
        "data": {"root": str(tmp_path / "no-data"), "img_size": 16, "num_classes": 10},
        "model": {"patch_size": 4, "dim": 32, "depth": 2, "num_heads": 2},
        "encoding": {"name": "sincos_2d"},
        "optim": {},
        "task": {},
    }
    module = classification.ImageClassifier(cfg)
    ckpt = tmp_path / "model.ckpt"
    hparams = dict(module.hparams)
    torch.save({"state_dict": module.state_dict(), "hyper_parameters": hparams,
                "pytorch-lightning_version": lightning.__version__}, ckpt)  # fmt: skip
    assert viz_main([f"ckpt={ckpt}", f"out={tmp_path / 'viz'}", "n_images=2"]) == 0
    assert "random images" in capsys.readouterr().out
    assert (tmp_path / "viz" / "pos_similarity.png").is_file()


@pytest.mark.parametrize(
    "encoding, expected",
    [("alibi", ["pos_bias.png"]), ("rope_1d", ["pos_rope_logit.png"]),
     ("sincos_1d", ["pos_similarity.png", "pos_table.png"]), ("none", [])],
)  # fmt: skip
def test_cli_on_a_sequence_checkpoint(tmp_path, capsys, encoding, expected):
    """1D pictures of a sequence run (this used to fail with KeyError: 'img_size')."""
    from ckpt_factory import SEQUENCE, make_checkpoint

    ckpt = make_checkpoint(tmp_path / "run", f"encoding={encoding}", *SEQUENCE)
    out = tmp_path / "viz"
    assert viz_main([f"ckpt={ckpt}", f"out={out}"]) == 0
    text = capsys.readouterr().out
    assert "sequence model" in text
    assert sorted(p.name for p in out.iterdir()) == expected if expected else not out.exists()
    if not expected:
        assert "has no table, rotation or bias to draw" in text


def test_cli_removes_the_pictures_of_an_earlier_run(tmp_path, capsys):
    """``out=`` reused for another model: only the files viz writes are removed first, and it says so."""
    for name in ("pos_table.png", "pos_similarity.png", "attn_maps.png", "attn_distance.csv", "notes.txt", "mine.png"):
        (tmp_path / name).write_text("old")
    args = [f"{k}={v}" for k, v in SMALL.items()] + ["encoding=rope_2d", f"out={tmp_path}", "n_images=2"]
    assert viz_main(args) == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["attn_distance.csv", "attn_distance.png", "attn_maps.png", "mine.png", "notes.txt",
                       "pos_rope_logit.png"]  # fmt: skip
    assert (tmp_path / "attn_distance.csv").read_text() != "old" and (tmp_path / "mine.png").read_text() == "old"
    out = capsys.readouterr().out
    assert f"removed 4 file(s) of an earlier viz run from {tmp_path}" in out


def test_cli_expands_a_checkpoint_pattern(tmp_path, capsys):
    """bash does not expand patterns inside key=value: viz does; of several matches it draws
    the newest and names the others; a pattern that matches nothing is refused."""
    import os

    from ckpt_factory import SEQUENCE, make_checkpoint

    from vitpos.errors import UserError

    old = make_checkpoint(tmp_path / "runs" / "alibi-aaaaaa" / "seed0", "encoding=alibi", *SEQUENCE)
    new = make_checkpoint(tmp_path / "runs" / "rope_1d-bbbbbb" / "seed0", "encoding=rope_1d", *SEQUENCE)
    os.utime(old, (1_000_000_000, 1_000_000_000))
    out = tmp_path / "viz"
    assert viz_main([f"ckpt={tmp_path}/runs/*-*/seed0/checkpoints/last.ckpt", f"out={out}"]) == 0
    text = capsys.readouterr().out
    assert f"matches 2 checkpoints; drawing the newest, {new}" in text and str(old) in text
    assert sorted(p.name for p in out.iterdir()) == ["pos_rope_logit.png"]  # rope_1d: the newest
    assert viz_main([f"ckpt={tmp_path}/runs/alibi-*/seed0", f"out={out}"]) == 0  # a run folder: its last.ckpt
    assert sorted(p.name for p in out.iterdir()) == ["pos_bias.png"]  # and the rope picture is gone
    with pytest.raises(UserError, match=r"ckpt=.*/sincos_\*/seed0/checkpoints/last.ckpt: no file or folder matches"):
        viz_main([f"ckpt={tmp_path}/runs/sincos_*/seed0/checkpoints/last.ckpt", f"out={out}"])


def test_colour_scale_fits_the_values_shown():
    from vitpos.viz.render import colour_scale

    assert colour_scale(np.array([0.6, 0.8, 1.0]))[:3] == (0.6, 1.0, "viridis")  # one-signed: min..max
    vmin, vmax, cmap, text = colour_scale(np.array([-0.2, 0.5, np.nan]))
    assert (vmin, vmax, cmap) == (-0.5, 0.5, "RdBu_r") and text == "range -0.2 to 0.5, centred on 0"
    lo, hi, _, _ = colour_scale(np.array([0.3, 0.3]))
    assert lo < 0.3 < hi  # a constant still gets a span


def test_sincos_similarity_picture_uses_the_whole_colour_range():
    """sincos_2d similarities lie in about 0.7..1: with a -1..1 scale the tiles were one colour."""
    pe = create_encoding("sincos_2d", EncodingContext(dim=192, num_heads=3, depth=1, grid=(8, 8)))
    sim = viz.position_similarity_data(pe)
    assert sim.min() > 0.5  # the premise: one-signed and far from -1
    img = viz.position_similarity(pe).reshape(-1, 3)
    import matplotlib

    ends = np.array(matplotlib.colormaps["viridis"]([0.0, 1.0])[:, :3] * 255)
    for colour in ends:  # both ends of the colour map appear: the scale spans the data
        assert (np.abs(img.astype(float) - colour).sum(1) < 12).any()


def test_cli_on_a_timm_run_draws_it_as_a_vitpos_vit(tmp_path):
    """A ``model=timm`` run (a timm ViT converted by apply_encoding; blocks at ``model.blocks``, the
    patch a pair at ``model.patch_embed``), trained at a non-square size: every picture, on its grid."""
    from ckpt_factory import make_checkpoint
    from conftest import run_command

    small = "model.kwargs={patch_size:4,depth:2,embed_dim:32,num_heads:2}"
    timm_run = ["model=timm", "model.name=vit_tiny_patch16_224", small, "encoding=rope_2d_mixed", "data=shapes",
                "data.img_size=[16,32]", "data.num_test=32"]  # fmt: skip
    ckpt = make_checkpoint(tmp_path / "run", *timm_run)
    ran = run_command("vitpos.viz", f"ckpt={ckpt}", f"out={tmp_path / 'viz'}", "n_images=2", cwd=tmp_path)
    assert ran.code == 0, ran.out + ran.err
    assert "encoding rope_2d_mixed; attention drawn on 2 test images of shapes" in ran.out, ran.out
    drawn = sorted(p.name for p in (tmp_path / "viz").iterdir())
    assert drawn == ["attn_distance.csv", "attn_distance.png", "attn_maps.png", "pos_rope_logit.png",
                     "pos_rope_mixed_freqs.png"]  # fmt: skip
    rows = (tmp_path / "viz" / "attn_distance.csv").read_text().splitlines()
    assert rows[0] == "block,head0,head1" and len(rows) == 3, rows  # 2 blocks, 2 heads
