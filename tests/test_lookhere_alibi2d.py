"""LookHere and 2D ALiBi: hand-computed bias entries, which keys each head sees,
translation invariance, the class token, other grids, the model path; and
multi-resolution training of the learned tables (gradients through the resize)."""

import itertools
import math

import pytest
import torch
from conftest import make_encoding, small_vit

from vitpos.encodings import OptionError
from vitpos.encodings import functional as fn
from vitpos.encodings.lookhere import head_layout
from vitpos.models import VisionTransformer

CPU, F32 = torch.device("cpu"), torch.float32
MASKED = torch.finfo(F32).min / 2

# 3x3 grid, index = 3 * row + col; the keys the centre query (index 4) sees, per head direction (degrees,
# counterclockwise from "right", up = 90 = towards row 0), worked out by hand from the authors' regions
CENTRE_SEES = {
    180: {  # half-planes, boundary row/column/diagonal included
        90: {0, 1, 2, 3, 4, 5},  # up: rows <= 1
        270: {3, 4, 5, 6, 7, 8},  # down
        180: {0, 1, 3, 4, 6, 7},  # left: cols <= 1
        0: {1, 2, 4, 5, 7, 8},  # right
        45: {0, 1, 2, 4, 5, 8},  # up-right: dx >= dy (their up cone + right cone)
        225: {0, 3, 4, 6, 7, 8},  # down-left
        135: {0, 1, 2, 3, 4, 6},  # up-left: dx + dy <= 0
        315: {2, 4, 5, 6, 7, 8},  # down-right
    },
    90: {  # quadrants ("corners") and cones ("triangles")
        135: {0, 1, 3, 4},
        315: {4, 5, 7, 8},
        45: {1, 2, 4, 5},
        225: {3, 4, 6, 7},
        90: {0, 1, 2, 4},  # up cone: dy <= -|dx|
        270: {4, 6, 7, 8},
        180: {0, 3, 4, 6},
        0: {2, 4, 5, 8},
    },
    45: {  # wedges between an axis and a diagonal ("eighths")
        112.5: {0, 1, 4},  # up .. up-left
        292.5: {4, 7, 8},  # down .. down-right
        247.5: {4, 6, 7},  # down .. down-left
        67.5: {1, 2, 4},  # up .. up-right
        157.5: {0, 3, 4},  # left .. up-left
        337.5: {4, 5, 8},  # right .. down-right
        22.5: {2, 4, 5},  # right .. up-right
        202.5: {3, 4, 6},  # left .. down-left
    },
}

# the same regions as integer inequalities on the offset (dy, dx) = key - query, rows growing downwards
REGIONS = {
    (180, 90): lambda dy, dx: dy <= 0,
    (180, 270): lambda dy, dx: dy >= 0,
    (180, 180): lambda dy, dx: dx <= 0,
    (180, 0): lambda dy, dx: dx >= 0,
    (180, 45): lambda dy, dx: dx >= dy,
    (180, 225): lambda dy, dx: dx <= dy,
    (180, 135): lambda dy, dx: dx + dy <= 0,
    (180, 315): lambda dy, dx: dx + dy >= 0,
    (90, 135): lambda dy, dx: dy <= 0 and dx <= 0,
    (90, 315): lambda dy, dx: dy >= 0 and dx >= 0,
    (90, 45): lambda dy, dx: dy <= 0 and dx >= 0,
    (90, 225): lambda dy, dx: dy >= 0 and dx <= 0,
    (90, 90): lambda dy, dx: dy <= -abs(dx),
    (90, 270): lambda dy, dx: dy >= abs(dx),
    (90, 180): lambda dy, dx: dx <= -abs(dy),
    (90, 0): lambda dy, dx: dx >= abs(dy),
    (45, 112.5): lambda dy, dx: dy <= -abs(dx) and dx <= 0,
    (45, 67.5): lambda dy, dx: dy <= -abs(dx) and dx >= 0,
    (45, 247.5): lambda dy, dx: dy >= abs(dx) and dx <= 0,
    (45, 292.5): lambda dy, dx: dy >= abs(dx) and dx >= 0,
    (45, 157.5): lambda dy, dx: dx <= -abs(dy) and dy <= 0,
    (45, 202.5): lambda dy, dx: dx <= -abs(dy) and dy >= 0,
    (45, 22.5): lambda dy, dx: dx >= abs(dy) and dy <= 0,
    (45, 337.5): lambda dy, dx: dx >= abs(dy) and dy >= 0,
}


def coords(h, w):
    return [(r, c) for r in range(h) for c in range(w)]


def offsets_by_pair(h, w):
    """(i, j) -> (dy, dx) = p_j - p_i."""
    cs = coords(h, w)
    return {(i, j): (cs[j][0] - cs[i][0], cs[j][1] - cs[i][1]) for i, j in itertools.product(range(h * w), repeat=2)}


# ------------------------------------------------------------------------------------------------ alibi_2d
def test_alibi_2d_hand_computed_entries():
    pe = make_encoding("alibi_2d", grid=(3, 3), heads=4)
    bias = pe.attention_bias((3, 3), 0, CPU, F32)  # (4, 9, 9)
    slopes = [1 / 4, 1 / 16, 1 / 64, 1 / 256]  # 2^(-8h/4)
    for h, m in enumerate(slopes):
        assert bias[h, 0, 0] == 0 and bias[h, 4, 4] == 0
        assert bias[h, 0, 1] == pytest.approx(-m)  # (0,0) -> (0,1): distance 1
        assert bias[h, 0, 4] == pytest.approx(-m * math.sqrt(2))  # (0,0) -> (1,1)
        assert bias[h, 0, 5] == pytest.approx(-m * math.sqrt(5))  # (0,0) -> (1,2)
        assert bias[h, 8, 0] == pytest.approx(-m * math.sqrt(8))  # (2,2) -> (0,0)
        assert bias[h, 6, 2] == pytest.approx(-m * math.sqrt(8))  # (2,0) -> (0,2)
    two = make_encoding("alibi_2d", grid=(3, 3), heads=2).attention_bias((3, 3), 0, CPU, F32)
    assert two[:, 0, 2].tolist() == pytest.approx([-2 / 16, -2 / 256])  # 2 heads: 2^-4, 2^-8


def test_alibi_2d_depends_only_on_the_length_of_the_offset():
    pe = make_encoding("alibi_2d", grid=(4, 5), heads=4)
    bias = pe.attention_bias((4, 5), 0, CPU, F32)
    by_length: dict[int, list] = {}
    for (i, j), (dy, dx) in offsets_by_pair(4, 5).items():
        by_length.setdefault(dy * dy + dx * dx, []).append(bias[:, i, j])
    for squared, values in by_length.items():  # translation, mirror and 90-degree rotation invariant
        values = torch.stack(values)
        torch.testing.assert_close(values, values[:1].expand_as(values))
        torch.testing.assert_close(values[0], -pe.slopes * math.sqrt(squared))


def test_alibi_2d_is_one_cached_tensor_for_every_block_and_ignores_the_training_grid():
    pe = make_encoding("alibi_2d", grid=(3, 3), heads=4, depth=3)
    first = pe.attention_bias((5, 7), 0, CPU, F32)
    assert first is pe.attention_bias((5, 7), 2, CPU, F32)  # built once per grid/device/dtype
    assert first.shape == (4, 35, 35)
    other = make_encoding("alibi_2d", grid=(5, 7), heads=4).attention_bias((5, 7), 0, CPU, F32)
    torch.testing.assert_close(first, other)  # no strategy: the grid alone decides


@pytest.mark.parametrize("name", ["alibi_2d", "lookhere"])
def test_class_token_row_and_column_are_zero(name):
    plain = make_encoding(name, grid=(3, 3), heads=4, depth=2)
    with_cls = make_encoding(name, grid=(3, 3), heads=4, depth=2, prefix=1)
    for block in (0, 1):
        bias = with_cls.attention_bias((4, 3), block, CPU, F32)  # (H, 1 + 12, 1 + 12), another grid too
        assert bias.shape == (4, 13, 13)
        assert torch.equal(bias[:, 0, :], torch.zeros(4, 13)) and torch.equal(bias[:, :, 0], torch.zeros(4, 13))
        torch.testing.assert_close(bias[:, 1:, 1:], plain.attention_bias((4, 3), block, CPU, F32))


# ------------------------------------------------------------------------------------------------ lookhere
@pytest.mark.parametrize("fov", [180, 90, 45])
def test_lookhere_hand_computed_entries_for_every_direction(fov):
    depth = 3  # layer slopes 1.5, 1.0, 0.5
    pe = make_encoding("lookhere", grid=(3, 3), heads=12, depth=depth, fov=fov)
    angles, _ = head_layout(12, fov)
    assert set(angles[:8]) == set(CENTRE_SEES[fov]) and angles[8:] == [None] * 4  # 8 directions + 4 free heads
    head_slopes = [0.5] * 8 + [1 / 4, 1 / 16, 1 / 64, 1 / 256]
    cs = coords(3, 3)
    for block, layer in enumerate([1.5, 1.0, 0.5]):
        bias = pe.attention_bias((3, 3), block, CPU, F32)  # (12, 9, 9)
        for head, angle in enumerate(angles):
            sees = set(range(9)) if angle is None else CENTRE_SEES[fov][angle]
            for j in range(9):
                distance = math.dist(cs[4], cs[j])
                expected = -2.0 * layer * head_slopes[head] * distance if j in sees else MASKED
                assert bias[head, 4, j].item() == pytest.approx(expected, rel=1e-6), (fov, block, head, angle, j)


def test_lookhere_boundaries_and_a_corner_query():
    pe = make_encoding("lookhere", grid=(3, 3), heads=12, depth=1)  # block 0: slope 2 * 1.5 * 0.5 = 1.5
    bias = pe.attention_bias((3, 3), 0, CPU, F32)
    up, down, left, right = 0, 1, 2, 3  # head order of LH-180
    assert (bias[up, 0] > MASKED).nonzero().flatten().tolist() == [0, 1, 2]  # top-left query, up: its own row
    assert (bias[left, 0] > MASKED).nonzero().flatten().tolist() == [0, 3, 6]  # left: its own column
    assert bias[up, 0, 2].item() == pytest.approx(-1.5 * 2)  # same row, two columns away
    assert (bias[down, 0] > MASKED).all() and (bias[right, 0] > MASKED).all()  # everything is below / right of it


@pytest.mark.parametrize("fov", [180, 90, 45])
@pytest.mark.parametrize("heads", [12, 4, 3, 2])
def test_lookhere_heads_see_their_region_on_a_rectangular_grid(fov, heads):
    h, w = 4, 5
    pe = make_encoding("lookhere", grid=(h, w), heads=heads, depth=1, dim=12 * heads, fov=fov)
    bias = pe.attention_bias((h, w), 0, CPU, F32)
    angles, _ = head_layout(heads, fov)
    seen_by_any = torch.zeros(h * w, h * w, dtype=torch.bool)
    for head, angle in enumerate(angles):
        visible = bias[head] > MASKED
        seen_by_any |= visible
        for (i, j), (dy, dx) in offsets_by_pair(h, w).items():
            assert visible[i, j] == (angle is None or REGIONS[(fov, angle)](dy, dx)), (head, angle, i, j)
        assert visible.diagonal().all()  # the query always sees itself: no row is fully masked
    if heads == 12 or fov == 180 or None in angles:
        assert seen_by_any.all()  # every key is seen by some head


def test_lookhere_depends_only_on_the_offset_and_slopes_vary_per_head_and_block():
    pe = make_encoding("lookhere", grid=(4, 5), heads=12, depth=4)
    biases = [pe.attention_bias((4, 5), b, CPU, F32) for b in range(4)]
    for bias in biases:  # translation invariance (per head): equal offsets, equal entries
        by_offset: dict[tuple, list] = {}
        for (i, j), off in offsets_by_pair(4, 5).items():
            by_offset.setdefault(off, []).append(bias[:, i, j])
        for values in by_offset.values():
            values = torch.stack(values)
            assert torch.equal(values, values[:1].expand_as(values))
    visible = biases[0] > MASKED
    for b in range(1, 4):
        assert torch.equal(biases[b] > MASKED, visible)  # the same directions in every block
    ratio = biases[0][visible & (biases[0] != 0)] / biases[3][visible & (biases[3] != 0)]
    torch.testing.assert_close(ratio, torch.full_like(ratio, 3.0))  # layer slopes 1.5 -> 0.5
    assert pe.slopes[0].tolist() == pytest.approx([1.5] * 8 + [0.75, 0.1875, 0.046875, 0.01171875])


def test_head_layouts_for_small_models():
    assert head_layout(12, 180) == ([90, 270, 180, 0, 45, 225, 135, 315, None, None, None, None],
                                    [0.5] * 8 + [1 / 4, 1 / 16, 1 / 64, 1 / 256])  # fmt: skip
    assert head_layout(6, 180) == ([90, 270, 180, 0, None, None], [0.5] * 4 + [1 / 4, 1 / 16])
    assert head_layout(4, 180) == ([90, 270, None, None], [0.5, 0.5, 1 / 4, 1 / 16])
    assert head_layout(4, 180, free_heads=0) == ([90, 270, 180, 0], [0.5] * 4)
    assert head_layout(3, 180) == ([90, 270, None], [0.5, 0.5, 1 / 4])
    assert head_layout(2, 90) == ([135, 315], [0.5, 0.5])
    assert head_layout(20, 180, free_heads=2)[1][8:] == [0.25] * 8 + [0.125] * 2 + [1 / 4, 1 / 16]  # repeats: halved


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_lookhere_masked_entries_are_finite_and_sdpa_has_no_nan(dtype):
    pe = make_encoding("lookhere", grid=(3, 3), heads=12, depth=1, fov=45, prefix=0)
    bias = pe.attention_bias((3, 3), 0, CPU, dtype)
    assert bias.dtype == dtype and torch.isfinite(bias).all()
    assert bias.min().item() == torch.finfo(dtype).min / 2
    # head 0 looks up/up-left: from the top-left corner it sees only itself
    assert (bias[0, 0] > bias.min()).nonzero().flatten().tolist() == [0]
    q, k, v = torch.randn(3, 1, 12, 9, 8).to(dtype).unbind(0)
    out = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=bias.float())
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[0, 0, 0], v[0, 0, 0].float())  # alone in its field of view: its own value


def test_lookhere_at_another_grid_needs_no_strategy_and_is_cached_per_grid():
    pe = make_encoding("lookhere", grid=(3, 3), heads=4, depth=2)
    assert pe.strategy == "extrapolate" and type(pe).strategies == ("extrapolate",)
    bias = pe.attention_bias((6, 5), 1, CPU, F32)
    assert bias.shape == (4, 30, 30)
    assert bias is pe.attention_bias((6, 5), 1, CPU, F32)  # cached, not rebuilt per step
    fresh = make_encoding("lookhere", grid=(6, 5), heads=4, depth=2).attention_bias((6, 5), 1, CPU, F32)
    assert torch.equal(bias, fresh)


@pytest.mark.parametrize(
    "options,option",
    [
        ({"fov": 60}, "encoding.fov"),
        ({"layer_slopes": [1.5]}, "encoding.layer_slopes"),
        ({"layer_slopes": [1.5, -1.0]}, "encoding.layer_slopes"),
        ({"global_slope": 0}, "encoding.global_slope"),
        ({"free_heads": 3}, "encoding.free_heads"),
    ],
)
def test_lookhere_bad_options_name_the_option(options, option):
    with pytest.raises(OptionError) as err:
        make_encoding("lookhere", heads=2, **options)
    assert err.value.option == option and option in err.value.line()


@pytest.mark.parametrize("pool", ["gap", "cls"])
def test_lookhere_model_forward_backward_and_attention_stays_in_each_field_of_view(pool):
    torch.manual_seed(0)
    model = VisionTransformer("lookhere", img_size=16, patch_size=4, dim=48, depth=2, num_heads=4, pool=pool)
    model.train()
    for size in (16, 24):  # the training grid, and a grid it never saw
        model.zero_grad()
        loss = model(torch.randn(2, 3, size, size)).logsumexp(-1).sum()
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        assert grads and all(torch.isfinite(g).all() for g in grads)
    maps = model.eval().attention_maps(torch.randn(1, 3, 24, 24))  # 6x6 grid: (1, 4, P + 36, P + 36) per block
    p = 1 if pool == "cls" else 0
    up = maps[0][0, 0, p:, p:]  # head 0 looks up: no weight on keys in lower rows
    rows = torch.arange(36) // 6
    below = rows[None, :] > rows[:, None]
    assert up[below].abs().max() == 0 and (up[~below] > 0).all()
    if p:
        assert (maps[0][0, 0, 1:, 0] > 0).all()  # the class token is visible to every query


def test_combo_of_lookhere_with_rope_builds():
    pe = make_encoding("combo", grid=(3, 3), heads=4, depth=2, parts=["rope_2d", "lookhere"])
    assert pe.attention_bias((3, 3), 0, CPU, F32).shape == (4, 9, 9)


# ------------------------------------------------------------------------- multi-resolution learned tables
@pytest.mark.parametrize("name", ["learned_1d", "learned_2d"])
@pytest.mark.parametrize("strategy", ["interpolate", "error"])
def test_training_at_another_grid_resizes_the_table_with_gradients(name, strategy):
    model = small_vit({"name": name, "strategy": strategy}).train()  # 4x4 training grid
    model(torch.randn(2, 3, 24, 24)).square().sum().backward()  # a 6x6 grid, in training: always resampled
    for pname, param in model.pos.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, pname
    reference = make_encoding(name, grid=(4, 4))  # same seed: same table
    train_table = reference.train().table_for((6, 6))
    assert train_table.requires_grad  # a function of the parameter, not a cached copy
    reference.strategy = "interpolate"
    torch.testing.assert_close(train_table, reference.eval().table_for((6, 6)))  # the same bicubic resize
    if name == "learned_1d":
        torch.testing.assert_close(train_table, fn.resample_table_2d(reference.table, (4, 4), (6, 6)))


@pytest.mark.parametrize("name", ["learned_1d", "learned_2d"])
def test_evaluation_strategies_are_unchanged(name):
    pe = make_encoding(name, grid=(4, 4), strategy="error").eval()
    with pytest.raises(ValueError, match="encoding.strategy=interpolate"):
        pe.table_for((6, 6))
    assert torch.equal(pe.table_for((4, 4)), make_encoding(name, grid=(4, 4)).table_for((4, 4)))
