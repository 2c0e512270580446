"""Where the class token sits for the two encodings that turn tokens by a learned matrix.

``string_cayley``: grid tokens turn by R(r) = P^T RoPE(r) P (the paper's) and the class token by I:
computed as RoPE(r) P q and P q (the shared P cancels in every logit), so the whole logit matrix,
the class row and column included, is the paper's. ``comrope`` with ``extrapolate``: the class token
sits at ``cls_position`` of the current image (its centre by default), not of the training image.
Grid tokens are computed by the very operations of the grid-only formula: a model without class
tokens (``model.pool=gap``, every committed result) gives bitwise the same outputs.
"""

import json
import math

import pytest
import torch
from conftest import TINY_SHAPES_RUN, finished_run, make_encoding, small_vit
from test_string import cayley_dense, rope_2d_generators, skew_from_parameter, xy

from vitpos.encodings import functional as fn
from vitpos.encodings.comrope import ComRoPE
from vitpos.encodings.rope import RoPE2D
from vitpos.encodings.string_rope import StringCayley
from vitpos.tasks.build import from_checkpoint

DH, HEADS = 16, 2
ONE_EPOCH = ["trainer.max_epochs=1", "+trainer.limit_train_batches=5", "+trainer.limit_val_batches=2", "threads=1"]


def randomize(pe, std, seed=1):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in pe.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * std)
    return pe


def qk(pe, grid, batch=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    shape = (batch, pe.ctx.num_heads, pe.num_prefix_tokens + math.prod(grid), pe.ctx.head_dim)
    return torch.randn(shape, generator=g), torch.randn(shape, generator=g)


# ---------------------------------------------------------------------------------- string_cayley
def papers_rotation(pe, block, q, positions, class_rotation):
    """The paper's frame, float64: grid token r turns by P^T exp(r_x L_x + r_y L_y) P = P^T RoPE(r) P;
    the class tokens (in front) by ``class_rotation(P)``."""
    p, out = pe.num_prefix_tokens, q.double().clone()
    for h in range(pe.ctx.num_heads):
        big_p = cayley_dense(skew_from_parameter(pe.skew[block, h].detach(), pe.ctx.head_dim))
        rope = torch.linalg.matrix_exp(torch.einsum("nk,kij->nij", positions, rope_2d_generators(pe.ctx.head_dim)))
        out[:, h, p:] = torch.einsum("nij,bnj->bni", big_p.T @ rope @ big_p, q[:, h, p:].double())
        out[:, h, :p] = q[:, h, :p].double() @ class_rotation(big_p).T
    return out


def papers_logits(pe, block, q, k, positions, class_rotation=lambda big_p: torch.eye(len(big_p)).double()):
    """(B, H, P + N, P + N) q'.k' in the paper's frame; an unrotated class token by default."""
    rq, rk = (papers_rotation(pe, block, x, positions, class_rotation) for x in (q, k))
    return rq @ rk.transpose(-1, -2)


def grid_only_cayley(pe, q, k, grid, block):
    """P, then rope_2d, on the grid tokens only: the operations the grid tokens go through."""
    pt = pe.basis(block).transpose(-1, -2)
    with torch.autocast(q.device.type, enabled=False):
        q, k = fn.on_grid_tokens(q, k, pe.num_prefix_tokens, lambda x: (x.float() @ pt).type_as(x))
    return RoPE2D.rotate_qk(pe, q, k, grid, block)


@pytest.mark.parametrize(
    "strategy, grid, positions",
    [
        ("extrapolate", (3, 5), xy(3, 5)),  # the training grid
        ("extrapolate", (5, 6), xy(5, 6)),
        ("interpolate", (5, 6), xy(5, 6, interp_from=(3, 5))),
    ],
)
def test_cayley_logits_with_a_class_token_are_the_papers_with_the_class_token_unrotated(strategy, grid, positions):
    pe = randomize(make_encoding("string_cayley", grid=(3, 5), dim=HEADS * DH, heads=HEADS, prefix=1), std=1.0)
    pe.strategy = strategy
    q, k = qk(pe, grid)
    for block in (0, 1):
        rq, rk = pe.rotate_qk(q, k, grid, block)
        ours = rq.double() @ rk.double().transpose(-1, -2)  # (B, H, 1 + N, 1 + N)
        torch.testing.assert_close(ours, papers_logits(pe, block, q, k, positions), atol=1e-4, rtol=1e-4)
        # the class token turned by P^T against the grid: logits far from these in its row and column only
        pt_class = papers_logits(pe, block, q, k, positions, class_rotation=lambda big_p: big_p.T)
        assert (ours - pt_class)[:, :, 0].abs().max() > 0.5 and (ours - pt_class)[:, :, :, 0].abs().max() > 0.5
        torch.testing.assert_close(ours[:, :, 1:, 1:], pt_class[:, :, 1:, 1:], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("prefix", [0, 1])
@pytest.mark.parametrize("autocast", [False, True])
def test_cayley_grid_tokens_are_bitwise_those_of_p_then_rope_2d(prefix, autocast):
    pe = randomize(make_encoding("string_cayley", grid=(3, 5), dim=HEADS * DH, heads=HEADS, prefix=prefix), std=0.3)
    for strategy in pe.strategies:
        pe.strategy = strategy
        for grid in ((3, 5), (6, 7)):
            q, k = qk(pe, grid)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                ours = pe.rotate_qk(q, k, grid, 1)
                grid_only = grid_only_cayley(pe, q, k, grid, 1)
            for a, b, x in zip(ours, grid_only, (q, k)):
                assert torch.equal(a[:, :, prefix:], b[:, :, prefix:]), (strategy, grid)
                if prefix:  # and the class token is P q, not q
                    assert (a[:, :, :prefix] - x[:, :, :prefix]).abs().max() > 0.1


@pytest.mark.parametrize("name", ["string_cayley", "comrope"])
def test_a_model_without_class_tokens_is_bitwise_the_grid_only_formula(name, monkeypatch):
    """``model.pool=gap`` (no class token): every output bit as with the class convention left out
    (Cayley: P on grid tokens only; ComRoPE: the class coordinate pinned at ``cls_position``); with
    ``pool=cls`` the convention shows (the test can tell the two apart)."""
    images = torch.randn(2, 3, 24, 24, generator=torch.Generator().manual_seed(3))  # a 6 x 6 grid, trained at 4 x 4
    outputs = {}
    for pool in ("gap", "cls"):
        model = small_vit(name, pool=pool)
        randomize(model.pos, std=0.3)
        model.pos.strategy = "extrapolate"
        outputs[pool, "ours"] = model(images).detach()  # with gradients: ComRoPE builds afresh, no cache
        with monkeypatch.context() as m:
            if name == "string_cayley":
                m.setattr(StringCayley, "rotate_qk", grid_only_cayley)
            else:
                m.setattr(ComRoPE, "class_coordinates", lambda pe, grid: [torch.full((1,), 0.5) for _ in grid])
            outputs[pool, "grid only"] = model(images).detach()
    assert torch.equal(outputs["gap", "ours"], outputs["gap", "grid only"])
    assert (outputs["cls", "ours"] - outputs["cls", "grid only"]).abs().max() > 1e-6  # small at random init


@pytest.mark.slow
def test_training_string_cayley_with_a_class_token_gives_the_papers_logits(tmp_path):
    """``python train.py ... model.pool=cls encoding=string_cayley``: the trained P in last.ckpt turns
    the class token so that its row and column of logits are the paper's with it unrotated."""
    run = finished_run(tmp_path / "runs", *TINY_SHAPES_RUN, *ONE_EPOCH, "model.pool=cls", "encoding=string_cayley")
    assert json.loads((run / "metrics.json").read_text())["status"] == "complete"
    module, _, cfg = from_checkpoint(run / "checkpoints" / "last.ckpt")
    pe = module.model.pos
    assert cfg["model"]["pool"] == "cls" and pe.num_prefix_tokens == 1 and pe.skew.abs().max() > 0  # P trained
    grid = tuple(pe.train_grid)  # 8 x 8
    q, k = qk(pe, grid)
    with torch.no_grad():
        for block in range(pe.ctx.depth):
            rq, rk = pe.rotate_qk(q, k, grid, block)
            ours = rq.double() @ rk.double().transpose(-1, -2)
            papers = papers_logits(pe, block, q, k, xy(*grid))
            torch.testing.assert_close(ours, papers, atol=1e-4, rtol=1e-5)
            pt_class = papers_logits(pe, block, q, k, xy(*grid), class_rotation=lambda big_p: big_p.T)
            assert (ours - pt_class)[:, :, 0].abs().max() > 1e-3  # the other frame would differ visibly


# ---------------------------------------------------------------------------------------- comrope
def class_row_asymmetry(pe, grid):
    """Largest |logit(cls, cell) - logit(cls, mirrored cell)| over the cells, cell (i, j) mirrored through
    the image centre to (h-1-i, w-1-j), with the same q = k at every token: q^T R(d) q = q^T R(-d) q, so
    0 exactly when the class token sits at the centre of the grid."""
    g = torch.Generator().manual_seed(2)
    v = torch.randn(1, pe.ctx.num_heads, 1, pe.ctx.head_dim, generator=g)
    x = v.expand(-1, -1, pe.num_prefix_tokens + math.prod(grid), -1)
    rq, rk = pe.rotate_qk(x, x, grid, 0)  # with gradients: built afresh, never from the evaluation cache
    row = (rq[0, :, :1] @ rk[0, :, 1:].transpose(-1, -2)).detach()[:, 0].reshape(-1, *grid)  # (H, h, w)
    return (row - row.flip(-1, -2)).abs().max().item()


@pytest.mark.parametrize("grid", [(12, 12), (12, 10), (5, 7)])
def test_comrope_extrapolate_keeps_the_class_token_at_the_centre_of_other_grids(grid):
    pe = randomize(make_encoding("comrope", grid=(8, 8), prefix=1), std=0.5)
    pe.strategy = "extrapolate"
    assert class_row_asymmetry(pe, grid) < 1e-4
    centres = [coords.mean() for coords in pe.coordinates(grid)]  # (n / 8) / 2 per axis: 0.75 at 12
    cls = pe.class_coordinates(grid)
    torch.testing.assert_close(torch.cat(cls), torch.stack(centres))
    if grid == (12, 12):
        assert [c.item() for c in cls] == [0.75, 0.75]
    pe.class_coordinates = lambda g: [torch.full((1,), 0.5) for _ in g]  # pinned at 0.5: off centre
    assert class_row_asymmetry(pe, grid) > 1e-2
    pe = make_encoding("comrope", grid=(3, 3), prefix=1)
    pe.strategy = "extrapolate"  # a 5 x 7 grid at the training spacing: the class token is cell (2, 3)'s
    rot = pe.rotation((5, 7), 0, "cpu")
    torch.testing.assert_close(rot[:, 0], rot[:, 1 + 2 * 7 + 3])


def test_comrope_class_token_position_by_strategy_and_option():
    """``cls_position`` is a fraction of the current image under both strategies: 0.5 interpolated is
    0.5 at every size; at the training grid both strategies agree exactly; null is 0 (unrotated)."""
    pe = make_encoding("comrope", grid=(8, 8), prefix=1, cls_position=0.25)
    for strategy, expected in (("interpolate", [0.25, 0.25]), ("extrapolate", [0.375, 0.25])):
        pe.strategy = strategy
        assert [c.item() for c in pe.class_coordinates((12, 8))] == expected
        assert [c.item() for c in pe.class_coordinates((8, 8))] == [0.25, 0.25]
    pe = make_encoding("comrope", grid=(8, 8), prefix=1, cls_position=None)
    pe.strategy = "extrapolate"
    assert [c.item() for c in pe.class_coordinates((12, 12))] == [0.0, 0.0]
    torch.testing.assert_close(pe.rotation((12, 12), 0, "cpu")[:, 0], torch.eye(16).expand(2, -1, -1))


@pytest.mark.parametrize("prefix", [0, 1])
@pytest.mark.parametrize("strategy", ["interpolate", "extrapolate"])
def test_comrope_grid_rotations_are_bitwise_those_with_the_class_token_pinned(prefix, strategy):
    pe = randomize(make_encoding("comrope", grid=(8, 8), prefix=prefix), std=0.5)
    pe.strategy = strategy
    for grid in ((8, 8), (12, 10)):
        ours = pe.rotation(grid, 1, "cpu")
        pinned = ComRoPE(pe.ctx, strategy, cls_position=0.5)
        pinned.load_state_dict(pe.state_dict())
        pinned.class_coordinates = lambda g: [torch.full((1,), 0.5) for _ in g]
        assert torch.equal(ours[:, prefix:], pinned.rotation(grid, 1, "cpu")[:, prefix:]), grid


@pytest.mark.slow
def test_training_comrope_extrapolate_with_a_class_token_centres_it_at_a_larger_size(tmp_path):
    """``python train.py ... model.pool=cls encoding=comrope encoding.strategy=extrapolate
    eval.resolutions=[48]``: the run evaluates 48 px (a 12 x 12 grid, trained at 8 x 8), and its
    trained encoding puts the class token at that grid's centre (0.75), seeing the image symmetrically."""
    overrides = ["model.pool=cls", "encoding=comrope", "encoding.strategy=extrapolate", "eval.resolutions=[48]"]
    run = finished_run(tmp_path / "runs", *TINY_SHAPES_RUN, *ONE_EPOCH, *overrides)
    assert "test/acc@res48" in json.loads((run / "metrics.json").read_text())["metrics"]
    module, _, _ = from_checkpoint(run / "checkpoints" / "last.ckpt")
    pe = module.model.pos.eval()
    assert pe.strategy == "extrapolate" and tuple(pe.train_grid) == (8, 8) and pe.num_prefix_tokens == 1
    assert class_row_asymmetry(pe, (12, 12)) < 1e-4
    assert [c.item() for c in pe.class_coordinates((12, 12))] == [0.75, 0.75]


def test_comrope_exported_for_any_size_moves_the_class_token_with_the_size():
    """Traced with a symbolic grid (``torch.export``, as ``vitpos.export`` traces for any size), the class
    coordinate n / n_train * cls_position is arithmetic on the size, not a constant of the traced size."""
    from test_export import export_of_grid

    pe = randomize(make_encoding("comrope", grid=(4, 4), prefix=1), std=0.5).eval()
    pe.strategy = "extrapolate"
    exported = export_of_grid(lambda grid: pe.rotation(grid, 0, torch.device("cpu")))
    for side in (16, 24, 48):  # grids 4, 6, 12: the class token at 0.5, 0.75, 1.5
        with torch.no_grad():
            rot = exported(torch.zeros(1, 3, side, side))
            torch.testing.assert_close(rot, pe.rotation((side // 4, side // 4), 0, "cpu"), rtol=1e-5, atol=1e-5)
    assert (rot[:, 0] - pe.rotation((4, 4), 0, "cpu")[:, 0]).abs().max() > 1e-2
