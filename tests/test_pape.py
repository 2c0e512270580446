"""PaPE and PaPE-RI: the efficient q/k widening against a re-implementation of the authors'
naive form, the bias's claimed properties (translation invariance, concavity, rotation
invariance for PaPE-RI), the class token, other grids, bf16, the widths and options."""

import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from conftest import make_encoding

from vitpos.encodings import OptionError, create_encoding

NAMES = ["pape", "pape_ri"]
DIM, HEADS, DH = 32, 2, 16


# ------------------------------------------------------------------ the authors' naive form, in our words
def reference_positions(grid, prefix):
    """(T, P) positions as the authors' ImageClassifier builds them: 1-based (x = column, y = row),
    row-major, the class token at (0, 0); sequences 1..n."""
    if len(grid) == 1:
        patches = torch.arange(1, grid[0] + 1, dtype=torch.float32)[:, None]
    else:
        h, w = grid
        cols, rows = torch.arange(1, w + 1).repeat(h), torch.arange(1, h + 1).repeat_interleave(w)
        patches = torch.stack([cols, rows], -1).float()
    return torch.cat([torch.zeros(prefix, patches.shape[1]), patches])


def naive_logits(pe, q, k, grid, block):
    """q . k / sqrt(Dh) after the widening of pape_naive.py (PaPE: 3M + 2 channels per head) or
    pape_ri.py (PaPE-RI: 2P + 1), fed with the same weights; the content is all heads' queries."""
    b, h, t, dh = q.shape
    pos = reference_positions(grid, pe.num_prefix_tokens)  # (T, P)
    hidden = q.transpose(1, 2).reshape(b, t, h * dh)  # (B, T, D)
    ones = torch.ones(b, h, t, 1)
    if pe.name == "pape":
        m = pe.parabolas
        u = (pos @ pe.directions[block].detach().reshape(h * m, -1).T).view(t, h, m).transpose(0, 1)  # (H, T, M)
        ab = (hidden @ pe.content[block].detach().reshape(2 * h * m, -1).T).view(b, t, 2, h, m)
        ab = ab.permute(2, 0, 3, 1, 4)  # (2, B, H, T, M)
        a, bb, u = F.softplus(ab[0]), ab[1], u.expand(b, -1, -1, -1)
        dot = lambda x, y: (x * y).sum(-1, keepdim=True)  # noqa: E731
        q_aug = torch.cat([q, dot(a, -(u**2)), a, 2 * a * u, dot(bb, u), bb], -1)
        k_aug = torch.cat([k, ones, -(u**2), u, ones, -u], -1)
    else:
        u = (pos[None] * pe.scales[block][:, None, None]).expand(b, -1, -1, -1)  # (B, H, T, P)
        a = F.softplus(hidden @ pe.content[block].detach().T).transpose(1, 2)[..., None].expand_as(u)  # (B, H, T, P)
        q_aug = torch.cat([q, (a * -(u**2)).sum(-1, keepdim=True), a, 2 * a * u], -1)
        k_aug = torch.cat([k, ones, -(u**2), u], -1)
    return q_aug @ k_aug.transpose(-2, -1) * dh**-0.5  # (B, H, T, T)


def widened_logits(pe, q, k, grid, block=1):
    """The logits SDPA computes from the hook's q and k: its default scale is 1/sqrt(width)."""
    rq, rk = pe.rotate_qk(q, k, grid, block)
    return rq.float() @ rk.float().transpose(-2, -1) * rq.shape[-1] ** -0.5


def bias_of(pe, grid, content, block=1):
    """(H, T, T) bias (already / sqrt(Dh)) when every token's query is ``content`` (Dh,) per head."""
    t = pe.num_prefix_tokens + math.prod(grid)
    q = content[None, :, None, :].expand(1, HEADS, t, DH).contiguous()  # (1, H, T, Dh)
    with torch.no_grad():
        return widened_logits(pe, q, torch.zeros_like(q), grid, block)[0]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("grid,prefix", [((4, 4), 0), ((3, 5), 1), ((7,), 1)])
def test_efficient_form_matches_the_naive_reference(name, grid, prefix):
    pe = make_encoding(name, grid=grid, dim=DIM, heads=HEADS, depth=2, prefix=prefix)
    t = prefix + math.prod(grid)
    torch.manual_seed(1)
    q, k, v = torch.randn(3, 3, HEADS, t, DH).unbind(0)  # (B, H, T, Dh)
    expected = naive_logits(pe, q, k, grid, block=1)
    assert expected.abs().max() > 1  # the parabolas move the logits
    torch.testing.assert_close(widened_logits(pe, q, k, grid), expected, rtol=1e-5, atol=1e-4)
    rq, rk = pe.rotate_qk(q, k, grid, 1)  # through SDPA itself: the scale compensation holds there too
    out = F.scaled_dot_product_attention(rq, rk, v)
    torch.testing.assert_close(out, expected.softmax(-1) @ v, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_widths_are_padded_to_a_multiple_of_8(name):
    for grid, extra in [((4, 4), {"pape": 7, "pape_ri": 4}), ((9,), {"pape": 3, "pape_ri": 3})]:
        pe = make_encoding(name, grid=grid, dim=64, heads=2)  # head dim 32
        rq, rk = pe.rotate_qk(torch.randn(2, 2, math.prod(grid), 32), torch.randn(2, 2, math.prod(grid), 32), grid, 0)
        assert rq.shape[-1] == rk.shape[-1] == 40 == pe.width and pe.pad == 40 - 32 - extra[name]
        assert (rk[..., 32 + extra[name] :] == 0).all()


# ------------------------------------------------------------------------------------- properties
def offsets(grid):
    """(i, j) -> (dy, dx) = p_i - p_j (query minus key) on a row-major grid."""
    cs = [(r, c) for r in range(grid[0]) for c in range(grid[1])]
    return {(i, j): (cs[i][0] - cs[j][0], cs[i][1] - cs[j][1]) for i, j in itertools.product(range(len(cs)), repeat=2)}


@pytest.mark.parametrize("name", NAMES)
def test_bias_depends_on_the_offset_only_and_carries_over_to_other_grids(name):
    content = torch.randn(HEADS, DH)
    pe = make_encoding(name, grid=(3, 5), dim=DIM, heads=HEADS, depth=2)
    by_offset: dict[tuple, torch.Tensor] = {}
    for grid in [(3, 5), (6, 4)]:  # the training grid and one it never saw (extrapolate)
        bias = bias_of(pe, grid, content)
        assert bias.diagonal(dim1=-2, dim2=-1).abs().max() < 1e-4  # a token and itself: no bias
        for (i, j), off in offsets(grid).items():
            seen = by_offset.setdefault(off, bias[:, i, j])
            torch.testing.assert_close(bias[:, i, j], seen, rtol=1e-5, atol=1e-4)
    assert len({round(float(v[0]), 3) for v in by_offset.values()}) > 10  # not a constant


def test_pape_bias_is_concave_along_every_line_and_depends_on_the_content():
    pe = make_encoding("pape", grid=(6, 6), dim=DIM, heads=HEADS, parabolas=8)
    bias = bias_of(pe, (6, 6), torch.randn(HEADS, DH)).view(HEADS, 6, 6, 6, 6)  # (H, yi, xi, yj, xj)
    query = bias[:, 2, 3]  # (H, 6, 6): the bias of query (2, 3) over the keys
    for d in [(0, 1), (1, 0), (1, 1), (1, -1), (1, 2)]:  # second differences along lines of keys: -2 d^T A d <= 0
        for y, x in itertools.product(range(6), repeat=2):
            (y0, x0), (y1, x1) = (y - d[0], x - d[1]), (y + d[0], x + d[1])
            if all(0 <= c < 6 for c in (y0, x0, y1, x1)):
                second = query[:, y0, x0] + query[:, y1, x1] - 2 * query[:, y, x]
                assert (second <= 1e-4).all() and (second < -1e-3).any(), (d, y, x)
    other = bias_of(pe, (6, 6), torch.randn(HEADS, DH)).view(HEADS, 6, 6, 6, 6)
    assert (other[:, 2, 3] - query).abs().max() > 1e-2  # curvature and tilt come from the query


def test_pape_is_not_rotation_invariant_but_pape_ri_is():
    content = torch.randn(HEADS, DH)
    grid = (6, 6)
    ri = bias_of(make_encoding("pape_ri", grid=grid, dim=DIM, heads=HEADS), grid, content)
    by_distance: dict[int, list] = {}
    for (i, j), (dy, dx) in offsets(grid).items():
        by_distance.setdefault(dy * dy + dx * dx, []).append(ri[:, i, j])
    previous = torch.zeros(HEADS)
    for squared in sorted(by_distance):  # (0, 5), (3, 4), (4, -3), (-5, 0), ...: one value per distance
        values = torch.stack(by_distance[squared])
        torch.testing.assert_close(values, values[:1].expand_as(values), rtol=1e-5, atol=1e-4)
        assert (values[0] <= previous + 1e-5).all()  # never less negative further away
        previous = values[0]
    assert (previous < -1e-2).all()
    pape = bias_of(make_encoding("pape", grid=grid, dim=DIM, heads=HEADS), grid, content)
    assert (pape[:, 0, 1] - pape[:, 0, 6]).abs().max() > 1e-2  # offsets (0, -1) and (-1, 0) differ


# ------------------------------------------------------------------------------------- class token
@pytest.mark.parametrize("name", NAMES)
def test_class_token_at_the_origin_or_outside_the_bias(name):
    grid, content = (3, 5), torch.randn(HEADS, DH)
    origin = bias_of(make_encoding(name, grid=grid, dim=DIM, heads=HEADS, prefix=1), grid, content)
    plain = bias_of(make_encoding(name, grid=grid, dim=DIM, heads=HEADS), grid, content)
    torch.testing.assert_close(origin[:, 1:, 1:], plain)  # patches among themselves: as without a class token
    assert origin[:, 0, 1:].abs().min() > 1e-3 and origin[:, 1:, 0].abs().min() > 1e-3  # (0, 0) is off the grid
    none = make_encoding(name, grid=grid, dim=DIM, heads=HEADS, prefix=1, cls_position="none")
    torch.manual_seed(2)
    q, k = torch.randn(2, 2, HEADS, 16, DH).unbind(0)
    logits, plain_logits = widened_logits(none, q, k, grid), q @ k.transpose(-2, -1) * DH**-0.5
    torch.testing.assert_close(logits[:, :, 0], plain_logits[:, :, 0])  # zero bias row ...
    torch.testing.assert_close(logits[:, :, :, 0], plain_logits[:, :, :, 0])  # ... and column
    assert (logits[:, :, 1:, 1:] - plain_logits[:, :, 1:, 1:]).abs().max() > 1e-2


# ------------------------------------------------------------------------------------- other grids
@pytest.mark.parametrize("name", NAMES)
def test_interpolate_maps_a_larger_grid_onto_the_trained_range(name):
    content = torch.randn(HEADS, DH)
    pe = make_encoding(name, grid=(4, 4), dim=DIM, heads=HEADS, strategy="interpolate")
    trained = bias_of(pe, (4, 4), content)
    plain = make_encoding(name, grid=(4, 4), dim=DIM, heads=HEADS)  # same seed, same weights
    torch.testing.assert_close(trained, bias_of(plain, (4, 4), content))  # the identity on the trained grid
    large = bias_of(pe, (7, 7), content)  # corners land on the trained corners: (n_t - 1) / (n - 1) = 1/2
    torch.testing.assert_close(large[:, 0, 48], trained[:, 0, 15])
    torch.testing.assert_close(large[:, 6, 42], trained[:, 3, 12])
    torch.testing.assert_close(large[:, 0, 16], trained[:, 0, 5])  # offset (2, 2) at half scale = (1, 1)
    extrapolated = bias_of(plain, (7, 7), content)
    assert (extrapolated[:, 0, 48] - large[:, 0, 48]).abs().max() > 1e-2


@pytest.mark.parametrize("name", NAMES)
def test_grid_tables_are_cached_and_built_per_grid(name):
    pe = make_encoding(name, grid=(4, 4), dim=DIM, heads=HEADS)
    first = pe.tables((5, 3), torch.device("cpu"))
    assert first is pe.tables((5, 3), torch.device("cpu"))
    assert first[0].shape == (15, 2) and first[1].shape == (15, pe.width - DH)
    pe.strategy = "interpolate"
    assert pe.tables((5, 3), torch.device("cpu")) is not first


@pytest.mark.parametrize("name", NAMES)
def test_bf16_autocast_stays_close_to_float32(name):
    grid = (8, 8)
    pe = make_encoding(name, grid=grid, dim=DIM, heads=HEADS, prefix=1)
    torch.manual_seed(3)
    q, k = torch.randn(2, 4, HEADS, 65, DH).unbind(0)
    want = widened_logits(pe, q, k, grid)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        rq, rk = pe.rotate_qk(q.bfloat16(), k.bfloat16(), grid, 1)
    assert rq.dtype == rk.dtype == torch.bfloat16
    got = rq.float() @ rk.float().transpose(-2, -1) * rq.shape[-1] ** -0.5
    assert ((got - want).norm() / want.norm()) < 1e-2
    assert (got.softmax(-1) - want.softmax(-1)).abs().max() < 2e-2


# ------------------------------------------------------------------------------------- options, model
@pytest.mark.parametrize(
    "name,options,option",
    [
        ("pape", {"parabolas": 0}, "encoding.parabolas"),
        ("pape", {"parabolas": 2.5}, "encoding.parabolas"),
        ("pape", {"cls_position": "first"}, "encoding.cls_position"),
        ("pape_ri", {"cls_position": "first"}, "encoding.cls_position"),
        ("pape_ri", {"align": "middle"}, "encoding.align"),
    ],
)
def test_bad_options_name_the_option(name, options, option):
    with pytest.raises(OptionError) as err:
        make_encoding(name, **options)
    assert err.value.option == option and option in str(err.value)


def test_a_widened_q_is_refused_by_a_second_parabolic_part():
    pe = make_encoding("combo", grid=(4, 4), parts=["pape", "pape_ri"])
    with pytest.raises(ValueError, match="encoding.parts"):
        pe.rotate_qk(torch.randn(1, 2, 16, 16), torch.randn(1, 2, 16, 16), (4, 4), 0)
    last = make_encoding("combo", grid=(4, 4), parts=["rope_2d", "pape"])
    assert last.rotate_qk(torch.randn(1, 2, 16, 16), torch.randn(1, 2, 16, 16), (4, 4), 0)[0].shape[-1] == 24


def test_parameters_per_block_and_head_and_weight_decay():
    pape = create_encoding("pape", dim=192, num_heads=3, grid=(8, 8), depth=6)
    assert pape.directions.shape == (6, 3, 50, 2) and pape.content.shape == (6, 2, 150, 192)
    assert sum(p.numel() for p in pape.parameters()) == 6 * 3 * 50 * 2 + 6 * 2 * 150 * 192
    assert pape.no_weight_decay() == {"directions"}
    ri = create_encoding("pape_ri", dim=192, num_heads=3, grid=(8, 8), depth=6)
    assert sum(p.numel() for p in ri.parameters()) == 6 * 3 * 192 and ri.no_weight_decay() == set()
    assert "scales" in ri.state_dict() and ri.scales.abs().max() <= 2**-0.5  # U(-1/sqrt(P), 1/sqrt(P)), saved
