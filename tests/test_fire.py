"""FIRE in 2D: the reference's 1D computation on a one-row grid, a by-pair
re-implementation of the 2D formula, offset-only dependence, the class token,
both strategies on larger and smaller grids, bf16 autocast, gradients, and the
MLP running over the distinct offsets only."""

import math

import pytest
import torch
from conftest import make_encoding, small_vit

from vitpos.encodings import OptionError
from vitpos.encodings.fire import fire_inputs

CPU, F32 = torch.device("cpu"), torch.float32


def randomize(pe, seed=0, c=0.37, scale=1.0):
    """Random MLP weights (larger than the default init, so that every entry differs); c and the threshold scale set."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in (pe.w1, pe.b1, pe.w2, pe.b2):
            p.copy_(torch.randn(p.shape, generator=g))
        pe.c.fill_(c)
        pe.threshold_scale.fill_(scale)
    return pe


def reference_fire_1d(n, w1, b1, w2, b2, c, init_l, l_multiplier, eps=1e-6):
    """mcleish7/arithmetic cramming/architectures/embeddings.py ``FIRE.forward`` (55af9d5), rewritten; w1 (W, 1),
    b1 (W,), w2 (H, W), b2 (H,) in nn.Linear's layout:
    positions 0..n-1 (no random positions), distances query - key, normaliser max(i, |mult * L0|),
    psi(x) = log(|c x| + 1), MLP Linear(1, W) -> ReLU -> Linear(W, H). Returns (H, n, n)."""
    positions = torch.arange(n, dtype=torch.float32)
    distance = positions[:, None] - positions[None, :]  # (n, n), i - j
    threshold = torch.tensor(abs(l_multiplier * init_l))
    normaliser = torch.maximum(positions, threshold)[:, None]  # (n, 1), one per query
    x = torch.log((c * distance).abs() + 1) / (torch.log((c * normaliser).abs() + 1) + eps)  # (n, n)
    hidden = torch.relu(x[..., None] * w1[:, 0] + b1)  # (n, n, W)
    return (hidden @ w2.t() + b2).permute(2, 0, 1)  # (H, n, n)


@pytest.mark.parametrize("n", [5, 9])
@pytest.mark.parametrize("prefix", [0, 1])
def test_one_row_grid_matches_the_reference_where_the_definitions_coincide(n, prefix):
    """They coincide on a (1, n) grid (dy = 0, so u_y = 0 and only the x column of the first layer acts), on keys
    at or left of the query (j <= i: the reference takes |i - j|, we keep the sign), and where both normalisers
    are the same: every query when L >= n - 1 (the reference thresholds them all), the last query otherwise."""
    for init_l, rows in ((1.5 * n, range(n)), (2.0, [n - 1])):
        pe = randomize(make_encoding("fire_2d", grid=(1, n), heads=3, dim=24, depth=2, prefix=prefix,
                                     init_threshold=init_l), scale=0.8)  # fmt: skip
        for block in (0, 1):
            bias = pe.attention_bias((1, n), block, CPU, F32)  # (3, P + n, P + n)
            w1, b1, w2, b2 = pe.w1[block], pe.b1[block], pe.w2[block], pe.b2[block]  # (2, W), (W,), (W, H), (H,)
            ref = reference_fire_1d(n, w1[1:].t(), b1, w2.t(), b2, 0.37, init_l, 0.8)  # the x row of w1: u_y = 0
            ours = bias[:, prefix:, prefix:]
            causal = torch.ones(n, n, dtype=torch.bool).tril()
            for i in rows:
                torch.testing.assert_close(ours[:, i][:, causal[i]], ref[:, i][:, causal[i]])
            if len(rows) == 1:  # L < n - 1: a query below the threshold normalises by psi(L) there, by psi(n - 1) here
                assert (ours[:, 1, :2] - ref[:, 1, :2]).abs().max() > 1e-3
            if prefix:
                assert not bias[:, 0].any() and not bias[:, :, 0].any()
            assert (ours - ref)[:, ~causal].abs().max() > 1e-3  # keys right of the query: the sign differs


def pair_by_pair(pe, h, w, block, extents):
    """The 2D formula for every token pair with Python floats: bias = MLP(u_y, u_x)."""
    c, big_l = pe.c[block].item(), abs(pe.threshold_scale[block].item() * pe.threshold_init)
    w1, b1, w2, b2 = pe.w1[block], pe.b1[block], pe.w2[block], pe.b2[block]
    coords = [(r, col) for r in range(h) for col in range(w)]
    out = torch.empty(w2.shape[1], h * w, h * w)
    for i, (ri, ci) in enumerate(coords):
        for j, (rj, cj) in enumerate(coords):
            u = []
            for d, extent in ((ri - rj, extents[0]), (ci - cj, extents[1])):
                psi = math.log(abs(c * abs(d)) + 1) / (math.log(abs(c * max(big_l, extent)) + 1) + 1e-6)
                u.append(math.copysign(psi, d) if d else 0.0)
            out[:, i, j] = torch.relu(torch.tensor(u) @ w1 + b1) @ w2 + b2
    return out


@pytest.mark.parametrize("grid", [(3, 5), (4, 4)])
def test_2d_bias_equals_the_formula_pair_by_pair_with_a_class_token(grid):
    pe = randomize(make_encoding("fire_2d", grid=grid, heads=2, depth=2, prefix=1), c=0.6, scale=1.3)
    h, w = grid
    for block in (0, 1):
        bias = pe.attention_bias(grid, block, CPU, F32)
        with torch.no_grad():
            torch.testing.assert_close(bias[:, 1:, 1:], pair_by_pair(pe, h, w, block, (h - 1, w - 1)))
        assert not bias[:, 0].any() and not bias[:, :, 0].any()  # class token row and column are zero


@pytest.mark.parametrize("strategy", ["extrapolate", "interpolate"])
@pytest.mark.parametrize("grid", [(4, 6), (6, 7), (2, 3)])
def test_bias_depends_only_on_the_offset(strategy, grid):
    pe = randomize(make_encoding("fire_2d", grid=(4, 6), heads=2, strategy=strategy), seed=3)
    h, w = grid
    bias = pe.attention_bias(grid, 1, CPU, F32)
    coords = [(r, col) for r in range(h) for col in range(w)]
    by_offset: dict[tuple, list] = {}
    for i, (ri, ci) in enumerate(coords):
        for j, (rj, cj) in enumerate(coords):
            by_offset.setdefault((ri - rj, ci - cj), []).append(bias[:, i, j])
    assert len(by_offset) == (2 * h - 1) * (2 * w - 1)
    for values in by_offset.values():
        values = torch.stack(values)
        assert torch.equal(values, values[:1].expand_as(values))
    distinct = torch.stack([v[0] for v in by_offset.values()])  # (E, H)
    assert torch.unique(distinct[:, 0]).numel() == distinct.shape[0]  # random weights: every offset its own bias
    assert not torch.equal(by_offset[(0, 1)][0], by_offset[(0, -1)][0])  # direction kept: left != right
    assert not torch.equal(by_offset[(1, 0)][0], by_offset[(0, 1)][0])  # and y != x


def offset_values(pe, grid, block=0):
    """{(dy, dx): (H,) bias} read off the (H, N, N) bias, query - key."""
    h, w = grid
    bias = pe.attention_bias(grid, block, CPU, F32)
    coords = [(r, col) for r in range(h) for col in range(w)]
    return {(ri - rj, ci - cj): bias[:, i, j] for i, (ri, ci) in enumerate(coords) for j, (rj, cj) in enumerate(coords)}


def test_strategies_on_larger_and_smaller_grids():
    train = (4, 4)  # extent 3 on both axes = the default threshold
    ex = randomize(make_encoding("fire_2d", grid=train, heads=2, strategy="extrapolate"), seed=1)
    it = randomize(make_encoding("fire_2d", grid=train, heads=2, strategy="interpolate"), seed=1)
    assert ex.threshold_init == 3.0
    trained = offset_values(ex, train)
    torch.testing.assert_close(it.attention_bias(train, 0, CPU, F32), ex.attention_bias(train, 0, CPU, F32))

    big = (6, 9)
    ex_big, it_big = offset_values(ex, big), offset_values(it, big)
    for offset, value in trained.items():  # extrapolate: every trained offset keeps its trained bias
        torch.testing.assert_close(ex_big[offset], value)
    assert any((it_big[o] - v).abs().max() > 1e-3 for o, v in trained.items())  # interpolate: offsets move
    with torch.no_grad():
        torch.testing.assert_close(it.attention_bias(big, 0, CPU, F32)[:, :, :],
                                   pair_by_pair(it, 6, 9, 0, (5, 8)))  # fmt: skip
        torch.testing.assert_close(ex.attention_bias(big, 0, CPU, F32), pair_by_pair(ex, 6, 9, 0, (3, 3)))

    # the MLP inputs: interpolate maps the larger grid into the trained range [-1, 1], extrapolate goes beyond it
    offsets, _ = it.offsets_and_index(big, CPU)
    with torch.no_grad():
        c, big_l = it.c[0], it.threshold(0)
        train_u = fire_inputs(it.offsets_and_index(train, CPU)[0], c, big_l, (3, 3)).abs().amax(0)
        assert train_u.tolist() == pytest.approx([1.0, 1.0], abs=1e-5)
        assert fire_inputs(offsets, c, big_l, it.extents(big)).abs().amax(0).tolist() == pytest.approx([1, 1], abs=1e-5)
        assert (fire_inputs(offsets, c, big_l, ex.extents(big)).abs().amax(0) > 1.2).all()

    small = (2, 3)  # the threshold floors the normaliser: no stretching, both strategies agree with training
    ex_small, it_small = offset_values(ex, small), offset_values(it, small)
    for offset in ex_small:
        torch.testing.assert_close(ex_small[offset], trained[offset])
        torch.testing.assert_close(it_small[offset], trained[offset])


def test_class_token_row_and_column_are_zero_on_any_grid():
    plain = make_encoding("fire_2d", grid=(3, 4), heads=2, depth=2)
    with_cls = make_encoding("fire_2d", grid=(3, 4), heads=2, depth=2, prefix=1)  # same seed: same weights
    for block in (0, 1):
        bias = with_cls.attention_bias((5, 2), block, CPU, F32)
        assert bias.shape == (2, 11, 11)
        assert torch.equal(bias[:, 0], torch.zeros(2, 11)) and torch.equal(bias[:, :, 0], torch.zeros(2, 11))
        torch.testing.assert_close(bias[:, 1:, 1:], plain.attention_bias((5, 2), block, CPU, F32))


def test_bf16_autocast_keeps_the_mlp_in_float32():
    pe = randomize(make_encoding("fire_2d", grid=(4, 5), heads=2), seed=2)
    full = pe.attention_bias((4, 5), 0, CPU, F32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        table = pe.offset_bias((4, 5), 0, CPU)
        half = pe.attention_bias((4, 5), 0, CPU, torch.bfloat16)
    assert table.dtype == F32 and half.dtype == torch.bfloat16
    torch.testing.assert_close(table, pe.offset_bias((4, 5), 0, CPU))  # the same float32 numbers
    torch.testing.assert_close(half.float(), full, rtol=1e-2, atol=1e-2)  # one bf16 rounding of the result


def test_gradients_reach_the_mlp_c_and_the_threshold_of_every_block():
    # 4x4 grid, 2 blocks, threshold 3 = the training extent; gap pooling (with cls the last block's grid rows
    # reach no output)
    model = small_vit("fire_2d").train()
    model(torch.randn(2, 3, 16, 16)).logsumexp(-1).sum().backward()
    names = {name for name, _ in model.pos.named_parameters()}
    assert names == {"w1", "b1", "w2", "b2", "c", "threshold_scale"}
    for name, param in model.pos.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
        assert param.shape[0] == 2, name  # stacked: one slice per block
        for block in (0, 1):
            assert param.grad[block].abs().sum() > 0, (name, block)
    # beyond the threshold the normaliser is the grid extent, which holds no gradient for L (FIRE's max)
    pe = make_encoding("fire_2d", grid=(4, 4), strategy="interpolate")
    pe.attention_bias((7, 7), 0, CPU, F32).sum().backward()
    assert pe.threshold_scale.grad[0] == 0 and pe.c.grad[0] != 0


def test_the_mlp_runs_over_the_distinct_offsets_and_the_index_is_cached():
    pe = make_encoding("fire_2d", grid=(5, 6), heads=2, depth=2)
    table = pe.offset_bias((5, 6), 1, CPU)
    assert table.shape == ((2 * 5 - 1) * (2 * 6 - 1), 2)  # 99 offsets x 2 heads, not 900 pairs
    offsets, index = pe.offsets_and_index((5, 6), CPU)
    assert offsets.shape == (99, 2) and index.shape == (30, 30)
    assert pe.offsets_and_index((5, 6), CPU)[1] is index  # cached per grid and device
    torch.testing.assert_close(pe.attention_bias((5, 6), 1, CPU, F32), table.t()[:, index])
    assert offsets[index[7, 20]].tolist() == [1 - 3, 1 - 2]  # token 7 = (1, 1), token 20 = (3, 2): query - key


def test_blocks_have_their_own_mlp_unless_shared():
    pe = make_encoding("fire_2d", grid=(3, 3), heads=2, depth=3)
    assert pe.w1.shape == (3, 2, 32) and pe.w2.shape == (3, 32, 2) and pe.c.shape == (3,)
    assert not torch.equal(pe.attention_bias((3, 3), 0, CPU, F32), pe.attention_bias((3, 3), 2, CPU, F32))
    shared = make_encoding("fire_2d", grid=(3, 3), heads=2, depth=3, shared=True)
    assert shared.w1.shape[0] == 1 and shared.c.shape == (1,)
    torch.testing.assert_close(shared.attention_bias((3, 3), 0, CPU, F32), shared.attention_bias((3, 3), 2, CPU, F32))
    vit_tiny = make_encoding("fire_2d", grid=(8, 8), dim=192, heads=3, depth=6)
    assert sum(p.numel() for p in vit_tiny.parameters()) == 6 * ((2 * 32 + 32) + (32 * 3 + 3) + 2)


@pytest.mark.parametrize(
    "options,option",
    [
        ({"mlp_width": 0}, "encoding.mlp_width"),
        ({"init_c": -0.1}, "encoding.init_c"),
        ({"init_threshold": 0}, "encoding.init_threshold"),
        ({"shared": "yes"}, "encoding.shared"),
        ({"strategy": "ntk"}, "encoding.strategy"),
    ],
)
def test_bad_options_name_the_option(options, option):
    with pytest.raises(OptionError) as err:
        make_encoding("fire_2d", **options)
    assert err.value.option == option and option in err.value.line()
