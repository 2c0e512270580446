"""Non-square image sizes end to end: ``data.img_size``, each of ``data.train_sizes`` and each of
``eval.resolutions`` take a side or an ``[h, w]`` pair (height first, one rule:
:func:`vitpos.sizes.as_hw`).

Every registered image encoding trains on 8x8, 4x8 and 8x4 grids and meets 4x8 and 8x4 grids
it was not trained on with its default strategy; a 16x32 image is a 4x8 grid (rows, columns),
never its transpose. The command line trains and evaluates such sizes and names them
``test/acc@res16x32`` (a square keeps ``test/acc@res16``); a malformed size or one the patches
do not tile is refused with a message naming the option, before anything is written.
"""

import json
import re
from pathlib import Path

import pytest
import torch
from conftest import EvalModule, compose_train, make_encoding, run_command, small_vit
from test_bad_input import assert_user_error, first_error, with_base

from vitpos.data.images import ImageDataModule
from vitpos.encodings import list_encodings
from vitpos.errors import UserError
from vitpos.extrapolate import evaluate_sizes
from vitpos.models.vit import VisionTransformer
from vitpos.run.identity import run_dir
from vitpos.sizes import as_hw, compact, parse_name, patch_grid, size_name, size_order

IMAGE_ENCODINGS = list_encodings(2)
GRIDS = [(8, 8), (4, 8), (8, 4)]
# a run of a few seconds on generated shapes (the small-run overrides of tests/test_train.py)
TINY = ["data=shapes", "model=vit_micro", "trainer.max_epochs=1", "data.num_train=600", "data.num_test=128",
        "data.val_size=128", "+trainer.limit_train_batches=3", "+trainer.limit_val_batches=1",
        "trainer.enable_progress_bar=false"]  # fmt: skip


# ------------------------------------------------------------------ the one rule of what a size is
def test_a_size_is_a_side_or_a_pair_and_is_named_height_first():
    assert as_hw(32) == (32, 32) and as_hw([16, 32]) == (16, 32) and as_hw((32, 16)) == (32, 16)
    assert [size_name(s) for s in (16, [16, 32], [32, 16], [32, 32])] == ["16", "16x32", "32x16", "32"]
    assert parse_name("16x32") == (16, 32) and parse_name("48") == (48, 48)
    assert compact([32, 32]) == 32 and compact([16, 32]) == "16x32"
    assert sorted([32, [32, 16], 16, 24, [16, 32]], key=size_order) == [16, [16, 32], [32, 16], 24, 32]
    for bad in ([16], [16, 32, 8], [0, 16], True, "16x32", [16, True], -4):
        with pytest.raises(ValueError, match="data.img_size: .* is not a size"):
            as_hw(bad, "data.img_size")


# ------------------------------------------------------------------ every encoding on non-square grids
@pytest.mark.parametrize("name", IMAGE_ENCODINGS)
@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
def test_every_encoding_trains_on_a_non_square_grid(name, grid):
    """Built for ``data.img_size=[4 h, 4 w]``: forward and backward on that grid, with finite
    gradients reaching every position parameter that the grid uses."""
    model = small_vit(name, img_size=[4 * grid[0], 4 * grid[1]]).train()
    assert model.pos.train_grid == grid
    model(torch.randn(2, 3, 4 * grid[0], 4 * grid[1])).square().sum().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("name", IMAGE_ENCODINGS)
@pytest.mark.parametrize("pool", ["gap", "cls"])
def test_every_encoding_meets_non_square_grids_with_its_default_strategy(name, pool):
    """Trained at 8x8 (32 px), evaluated at 4x8 (16x32 px) and 8x4 (32x16 px): finite logits."""
    model = small_vit(name, pool=pool, img_size=32)
    for h, w in [(16, 32), (32, 16)]:
        images = torch.randn(2, 3, h, w)
        assert model.grid_for(images) == (h // 4, w // 4)
        with torch.no_grad():
            assert torch.isfinite(model(images)).all(), f"{name} at {h}x{w}"


def _interaction(pe, grid) -> list[torch.Tensor]:
    """(N, N) matrices of how positions meet on ``grid``, one per hook the encoding uses: the Gram
    matrix of its added table, the q.k logits of all-ones q and k after rotation, its bias."""
    n, (heads, dh) = grid[0] * grid[1], (pe.ctx.num_heads, pe.ctx.head_dim)
    found = []
    with torch.no_grad():
        table = pe.add_to_tokens(torch.zeros(1, n, pe.ctx.dim), grid)[0]  # (N, D)
        assert table.shape == (n, pe.ctx.dim)
        if table.abs().sum() > 0:
            found.append(table @ table.T)
        q = torch.ones(1, heads, n, dh)
        q2, k2 = pe.rotate_qk(q, q.clone(), grid, 0)  # (1, H, N, Dh)
        assert q2.shape[:3] == k2.shape[:3] == (1, heads, n)
        if not torch.equal(q2, q):
            found.append((q2 @ k2.transpose(-1, -2))[0].sum(0))
        bias = pe.attention_bias(grid, 0, torch.device("cpu"), torch.float32)
        if bias is not None:
            assert bias.shape[-2:] == (n, n)
            found.append(bias.reshape(-1, n, n).sum(0))
    return found


@pytest.mark.parametrize("name", IMAGE_ENCODINGS)
def test_each_hook_gives_the_shape_of_a_non_square_grid(name):
    """Tables of N = h * w rows, rotations of N tokens, biases N x N at 4x8 and 8x4 (trained at 8x8)."""
    pe = make_encoding(name, grid=(8, 8)).eval()
    for grid in [(4, 8), (8, 4)]:
        _interaction(pe, grid)


@pytest.mark.parametrize("name", ["sincos_2d", "rope_2d", "rope_2d_dinov3", "alibi_2d", "string_cayley"])
def test_a_transposed_grid_is_the_transpose_not_a_swap(name):
    """Encodings whose two axes play the same role: how token (r, c) meets token (r', c') on a
    4x8 grid equals how (c, r) meets (c', r') on an 8x4 grid. Reading h for w anywhere (a grid
    built as (w, h), a row-major index taken column-major) breaks it."""
    pe = make_encoding(name, grid=(8, 8)).eval()
    h, w = 4, 8
    transposed = torch.tensor([c * h + r for r in range(h) for c in range(w)])  # index of (c, r) on the w x h grid
    found = list(zip(_interaction(pe, (h, w)), _interaction(pe, (w, h)), strict=True))
    assert found
    for wide, tall in found:
        torch.testing.assert_close(wide, tall[transposed][:, transposed], atol=1e-4, rtol=1e-4)


def test_sincos_2d_rows_of_a_wide_grid_share_their_row_half():
    """On a 4x8 grid, tokens 0..7 are row 0 (row-major): one row half, eight column halves."""
    pe = make_encoding("sincos_2d", grid=(4, 8))
    table = pe.add_to_tokens(torch.zeros(1, 32, 32), (4, 8))[0].reshape(4, 8, 32)
    rows, cols = table[..., :16], table[..., 16:]
    assert torch.equal(rows, rows[:, :1].expand_as(rows)) and torch.equal(cols, cols[:1].expand_as(cols))
    assert not torch.equal(rows[0, 0], rows[1, 0]) and not torch.equal(cols[0, 0], cols[0, 1])


# ------------------------------------------------------------------ data and evaluation
def test_shapes_data_at_a_non_square_size_and_its_batches():
    """``data=shapes`` with ``data.img_size=[16,32]``: 4x8 cells; test sets drawn at any size the
    cells tile; ``data.train_sizes`` with a pair tags each batch with its size."""
    dm = ImageDataModule(name="shapes", img_size=[16, 32], num_train=64, val_size=16, num_test=24, batch_size=8,
                         train_sizes=[[16, 32], 32], crop_padding=0)  # fmt: skip
    dm.setup()
    assert dm.train[0].shape[-2:] == (16, 32) and dm.train_sizes == ((16, 32), 32)
    labels = next(iter(dm.test_dataloader_at([16, 32])))[1]
    for size, shape in [([32, 16], (32, 16)), (32, (32, 32)), ([8, 64], (8, 64))]:
        images, at_size = next(iter(dm.test_dataloader_at(size)))
        assert images.shape[-2:] == shape and torch.equal(at_size, labels)  # the same layouts, drawn at that size
    seen = set()
    for batch in dm.train_dataloader():
        images, _ = dm.prepare_batch(batch, train=True)
        seen.add(tuple(images.shape[-2:]))
        assert tuple(images.shape[-2:]) == as_hw(batch[2])
    assert seen == {(16, 32), (32, 32)}


class _Native32:
    """The part of a datamodule ``evaluate_sizes`` uses, native at 32 px like CIFAR-10."""

    def __init__(self):
        self.resampling = ImageDataModule(name="cifar10").resampling

    def test_dataloader_at(self, size):
        h, w = as_hw(size)
        return [(torch.randn(4, 3, h, w), torch.randint(0, 10, (4,)))]


def test_tags_name_both_sides_and_an_axis_above_native_is_upsampled():
    module = EvalModule(small_vit("rope_2d", img_size=32))
    sizes = [16, (16, 32), (32, 16), 32, (32, 48)]
    results = evaluate_sizes(module, _Native32(), sizes, [module.encoding.strategy], "res", progress=False)
    accs = sorted(k for k in results if k.startswith("test/acc@"))
    assert accs == sorted(["test/acc@res16", "test/acc@res16x32", "test/acc@res32x16", "test/acc@res32",
                           "test/acc@res32x48up"])  # fmt: skip


# ------------------------------------------------------------------ reports: their own columns, ticks, protocol
def test_reports_give_non_square_sizes_their_own_columns_and_ticks(tmp_path, monkeypatch):
    """The compare report's table (a column per size: the squares, then the others by pixels, wide
    before tall), its plot (a tick per position: 16x32 and 32x16 share sqrt(512), on a row of
    their own under the squares') and the protocol (``trained at 16x32 px``)."""
    import pandas as pd
    from matplotlib.figure import Figure

    from vitpos.compare.plots import plot_extrapolation
    from vitpos.compare.protocol import Protocol
    from vitpos.compare.report import strategy_tables

    accs = {"16": 0.5, "16x32": 0.55, "32x16": 0.52, "24": 0.6, "32": 0.7, "32x48up": 0.4}
    row = {"task": "g", "model": "m", "budget": "b", "label": "rope_2d-0a1b2c", "seeds": 1}
    for tag, value in accs.items():
        row |= {f"test/acc@res{tag}_mean": value, f"test/acc@res{tag}_std": 0.0}
    groups = pd.DataFrame([row])
    (table,) = [part for part in strategy_tables(groups, {"rope_2d-0a1b2c": "rope_2d"}, "res") if "|" in part]
    assert table.splitlines()[0] == "| label | 16 | 24 | 32 | 16x32 | 32x16 | 32x48 (upsampled) |"
    drawn = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, path, **kw: drawn.append(fig))
    assert plot_extrapolation(groups, "res", tmp_path / "acc.png")
    ax = drawn[0].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["16", "24", "32"]
    assert [t.get_text() for t in ax.get_xticklabels(minor=True)] == ["16x32\n32x16", "32x48\n(upsampled)"]
    protocol = Protocol.of_config({"data": {"name": "cifar10", "img_size": [16, 32], "native_size": 32}})
    assert protocol.budget() == "cifar10, full train set, trained at 16x32 px (native 32)"
    assert Protocol.from_columns(protocol.columns()) == protocol


# ------------------------------------------------------------------ the command line
def _metrics(root: Path) -> dict:
    (status,) = root.rglob("metrics.json")
    return json.loads(status.read_text())["metrics"]


def _text_table(root: Path, tag: str) -> str:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = {p.parent for p in root.rglob("events.out.tfevents.*")}
    acc = EventAccumulator(str(events), size_guidance={"tensors": 0}).Reload()
    return acc.Tensors(f"{tag}/text_summary")[-1].tensor_proto.string_val[0].decode()


def test_train_evaluates_non_square_resolutions_and_names_them(tmp_path):
    root = tmp_path / "runs"
    ran = run_command("train.py", *TINY, "eval.resolutions=[16,[16,32],[32,16],32]", "task.pictures=false",
                      f"run.root={root}", cwd=tmp_path)  # fmt: skip
    assert ran.code == 0, ran.out + ran.err
    assert "test/acc@res16x32" in ran.out and "test/acc@res32x16" in ran.out
    metrics = _metrics(root)
    assert {"test/acc@res16", "test/acc@res16x32", "test/acc@res32x16", "test/acc@res32"} <= set(metrics)
    table = _text_table(root, "test/beyond_training_size")
    assert "| strategy | 16 | 32 | 16x32 | 32x16 |" in table, table  # the squares, then h x w


def test_train_at_a_non_square_size_end_to_end(tmp_path):
    """``data.img_size=[16,32]``: a 4x8 training grid (checkpoint included), pictures on that
    grid, and the extrapolation tool on its checkpoint."""
    from vitpos.tasks.build import from_checkpoint

    root = tmp_path / "runs"
    args = [*TINY, "encoding=rope_2d", "data.img_size=[16,32]", "eval.resolutions=[[16,32],[32,16],16]"]
    ran = run_command("train.py", *args, f"run.root={root}", cwd=tmp_path)
    assert ran.code == 0, ran.out + ran.err
    assert {"test/acc", "test/acc@res16x32", "test/acc@res32x16", "test/acc@res16"} <= set(_metrics(root))
    (ckpt,) = root.rglob("last.ckpt")
    module, _, cfg = from_checkpoint(ckpt)
    assert module.model.pos.train_grid == (4, 8) and list(cfg["data"]["img_size"]) == [16, 32]
    out = tmp_path / "extrapolation"
    tool = run_command("vitpos.extrapolate", f"ckpt={ckpt}", "resolutions=[[32,64],16]", "strategies=default",
                       f"out={out}", "device=cpu", cwd=tmp_path)  # fmt: skip
    assert tool.code == 0, tool.out + tool.err
    assert "| run | strategy | 16 | 32x64 |" in tool.out  # shapes: drawn at every size, never upsampled
    assert (out / "extrapolation.png").is_file()


def test_run_folders_of_sizes():
    """A pair is its own run only when its sides differ: ``[32,32]`` trains in the folder of ``32``
    (and every run with a side keeps its hash), ``[16,32]`` and ``[32,16]`` in folders of their own."""

    def folder(*args):
        return run_dir(compose_train(*TINY, *args))

    square = folder("data.img_size=32")
    assert folder("data.img_size=[32,32]") == square
    assert len({square, folder("data.img_size=[16,32]"), folder("data.img_size=[32,16]")}) == 3
    assert folder("data.train_sizes=[16,[32,32]]") == folder("data.train_sizes=[16,32]")
    assert folder("data.train_sizes=[16,[16,32]]") != folder("data.train_sizes=[16,32]")


# ------------------------------------------------------------------ bad sizes
BAD_SIZES = [
    (["data.img_size=[16,30]"], "data.img_size: [16, 30] is not a multiple of"),  # shapes: of its cells first
    (["eval.resolutions=[16,[16,30]]"], "eval.resolutions[1]"),
    (["data.train_sizes=[16,[18,16]]"], "data.train_sizes[1]"),
    (["data.img_size=[16]"], "data.img_size: [16] is not a size"),
    (["data.img_size=[16,32,8]"], "data.img_size: [16, 32, 8] is not a size"),
    (["data.img_size=[0,16]"], "data.img_size: [0, 16] is not a size"),
    (["data.img_size=true"], "data.img_size: True is not a size"),
    (["eval.resolutions=[[16]]"], "eval.resolutions[0]"),
    (["data.train_sizes=[16,[16,true]]"], "data.train_sizes[1]"),
    (["data=cifar10", "data.native_size=[32]"], "data.native_size"),
]


@pytest.mark.parametrize("args,needle", BAD_SIZES, ids=[" ".join(a) for a, _ in BAD_SIZES])
def test_a_bad_size_is_refused_naming_the_option(args, needle):
    message = first_error(with_base(args))
    assert message is not None and needle in message, message


def test_a_pair_the_patch_does_not_tile_writes_nothing(tmp_path):
    ran = run_command("train.py", "data=shapes", "model=vit_micro", "data.img_size=[16,30]",
                      f"run.root={tmp_path / 'runs'}", cwd=tmp_path)  # fmt: skip
    assert_user_error(ran, "data.img_size")
    assert "e.g. [16,28] or [16,32]" in ran.err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("size", [16, 24, [16, 32], [8, 24], 30, [16, 30], [18, 18]])
def test_the_patch_rule_is_one_rule_for_the_check_the_model_and_its_forward(size):
    """:func:`vitpos.sizes.patch_grid` is the check's rule (``data.img_size``), the model's grid and the
    forward's: a size the patches tile gives the same grid everywhere, any other is refused by all three,
    the check naming the nearest sizes that tile."""
    h, w = as_hw(size)
    tiled = h % 4 == 0 and w % 4 == 0
    if not tiled:
        with pytest.raises(UserError, match=r"data.img_size.*not a multiple of model.patch_size=4") as err:
            patch_grid(size, 4, "data.img_size")
        offered = [int(n) for n in re.findall(r"\d+", err.value.fix)]  # "e.g. 28 or 32", "e.g. [16,28] or [16,32]"
        assert offered and all(side % 4 == 0 for side in offered), err.value.fix
        with pytest.raises(ValueError, match="not a multiple of model.patch_size=4"):
            VisionTransformer("none", img_size=size, patch_size=4, dim=16, depth=1, num_heads=2)
        with pytest.raises(ValueError, match="not a multiple of model.patch_size=4"):
            VisionTransformer("none", img_size=16, patch_size=4, dim=16, depth=1, num_heads=2).grid_for(
                torch.zeros(1, 3, h, w)
            )
        return
    model = VisionTransformer("none", img_size=size, patch_size=4, dim=16, depth=1, num_heads=2)
    assert patch_grid(size, 4) == model.pos.train_grid == model.grid_for(torch.zeros(1, 3, h, w)) == (h // 4, w // 4)


def test_the_config_check_runs_the_data_sets_rules_once(monkeypatch):
    """The check builds the data module, whose constructor runs :func:`check_image_data`; the check itself keeps
    only what needs the model's patch (the sizes), so the data set's rules run once per check (counted by one
    rule that only :func:`check_image_data` calls)."""
    import vitpos.data.options as options
    from vitpos.validate import validate

    calls = []
    rule = options.check_size_schedule
    monkeypatch.setattr(options, "check_size_schedule", lambda *a: calls.append(a) or rule(*a))
    validate(compose_train("data=shapes", "model=vit_micro", "data.train_sizes=[16,32]"))
    assert len(calls) == 1
