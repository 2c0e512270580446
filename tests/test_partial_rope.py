"""Partial RoPE (``rotate_fraction``: p-RoPE, Barbero et al. 2024; ``rotate_heads``) on every
rotary encoding of rope.py: logits still depend on offsets only, what does not turn is left
exactly alone, the defaults are the plain encodings bit for bit, the pairs kept are the
paper's (checked against the authors' ``apply_rope(rope_proportion=)``), bad values are named;
and on every encoding of the registry that takes ``rotate_fraction``, the pairs left still are
the lowest-|omega| ones whatever order the encoding keeps its frequencies in."""

import itertools
import math
import re

import pytest
import torch
import torch._dynamo as dynamo
from conftest import make_encoding, small_vit

from vitpos.encodings import OptionError, get_encoding_class, list_encodings
from vitpos.encodings import functional as fn

CPU = torch.device("cpu")
GRIDS = {"rope_1d": (12,), "rope_1d_learned": (12,), "rope_2d": (3, 5), "rope_2d_mixed": (3, 5)}
NAMES = list(GRIDS)
DH = 16  # dim 32, 2 heads: 8 pairs, 4 per axis in 2D


def positions(grid):
    """(N, len(grid)) integer coordinates of a row-major grid."""
    return list(itertools.product(*(range(n) for n in grid)))


def pair_channels(pair: int, layout: str) -> list[int]:
    return [2 * pair, 2 * pair + 1] if layout == "interleaved" else [pair, pair + DH // 2]


@pytest.mark.parametrize("name", NAMES)
def test_logits_depend_only_on_offsets_with_partial_rotation(name):
    grid = GRIDS[name]
    pe = make_encoding(name, grid=grid, rotate_fraction=0.5, rotate_heads=1)
    n = math.prod(grid)
    # the same q and k content at every position: any change of logit comes from position
    q = torch.randn(1, 2, 1, DH).expand(1, 2, n, DH)
    k = torch.randn(1, 2, 1, DH).expand(1, 2, n, DH)
    rq, rk = pe.rotate_qk(q, k, grid, 1)
    logits = rq @ rk.transpose(-1, -2)  # (1, H, N, N)
    coords = positions(grid)
    by_offset = {}
    for i, j in itertools.product(range(n), repeat=2):
        off = tuple(a - b for a, b in zip(coords[i], coords[j]))
        by_offset.setdefault(off, []).append(logits[0, :, i, j])
    spread = max((torch.stack(v) - v[0]).abs().max() for v in by_offset.values())
    assert spread < 1e-4
    values = torch.stack([v[0] for v in by_offset.values()])  # (offsets, H)
    assert values[:, 0].std() > 1e-2  # head 0 turns: the logit does depend on the offset
    assert values[:, 1].std() < 1e-5  # head 1 does not turn: it sees no position


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_pairs_and_heads_that_do_not_turn_are_left_exactly_alone(name, layout):
    grid = GRIDS[name]
    pe = make_encoding(name, grid=grid, prefix=1, rotate_fraction=0.5, rotate_heads=1, layout=layout)
    n = 1 + math.prod(grid)
    q, k = torch.randn(2, 2, n, DH), torch.randn(2, 2, n, DH)
    rq, rk = pe.rotate_qk(q, k, grid, 0)
    assert torch.equal(rq[:, 1], q[:, 1]) and torch.equal(rk[:, 1], k[:, 1])  # head 1: not rotated
    axes, per_axis = len(grid), 8 // len(grid)
    kept = [a * per_axis + i for a in range(axes) for i in range(per_axis // 2)]  # the fastest half, per axis
    still = [c for p in range(8) if p not in kept for c in pair_channels(p, layout)]
    turning = [c for p in kept for c in pair_channels(p, layout)]
    assert torch.equal(rq[:, 0, :, still], q[:, 0, :, still]) and torch.equal(rk[:, 0, :, still], k[:, 0, :, still])
    moved = (rq[:, 0, 2:, turning] - q[:, 0, 2:, turning]).abs().amax(dim=(0, 1))  # past the class token, (0, 0)
    assert (moved > 1e-3).all()  # every kept pair does turn somewhere
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1))


def plain_angles(pe, grid) -> torch.Tensor:
    """The angles of the encodings before partial rotation existed, rebuilt: (N, Dh/2) or (H, N, Dh/2)."""
    if pe.name == "rope_1d":
        return torch.outer(torch.arange(grid[0], dtype=torch.float32), fn.rope_inv_freq(DH // 2, pe.base))
    if pe.name == "rope_1d_learned":
        return torch.arange(grid[0], dtype=torch.float32)[None, :, None] * pe.freqs[0].float()[:, None, :]
    ys, xs = (c.flatten().float() for c in torch.meshgrid(torch.arange(grid[0]), torch.arange(grid[1]), indexing="ij"))
    if pe.name == "rope_2d":
        inv = fn.rope_inv_freq(DH // 4, pe.base)
        return torch.cat([torch.outer(xs, inv), torch.outer(ys, inv)], -1)
    f = pe.freqs[0].float()  # (H, Dh/2, 2)
    return xs[None, :, None] * f[:, None, :, 0] + ys[None, :, None] * f[:, None, :, 1]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("options", [{}, {"rotate_fraction": 1.0, "rotate_heads": None}, {"rotate_heads": 2}])
def test_full_rotation_is_the_plain_encoding_bit_for_bit(name, options):
    grid = GRIDS[name]
    pe = make_encoding(name, grid=grid, **options)
    assert pe.turning is None  # the plain path: no mask at all
    with torch.no_grad():
        rot = pe.rotation(grid, 0, CPU)
        angles = plain_angles(pe, grid)
    assert torch.equal(rot, torch.polar(torch.ones_like(angles), angles))
    model, plain = small_vit({"name": name, **options}), small_vit(name)
    images = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert torch.equal(model(images), plain(images))


def gemma_apply_rope(x, positions, base, rope_proportion):
    """The authors' p-RoPE, in our words (google-deepmind/gemma, gemma/gm/math/_positional_embeddings.py,
    ``apply_rope``, commit faba7e31): int(p * Dh // 2) pairs with timescales base^(2i/Dh), the rest an
    infinite timescale; pairs (i, i + Dh/2). x: (B, N, H, Dh), positions: (B, N)."""
    head_dim = x.shape[-1]
    rope_angles = int(rope_proportion * head_dim // 2)
    timescale = base ** (2.0 / head_dim * torch.arange(rope_angles, dtype=torch.float32))
    timescale = torch.cat([timescale, torch.full((head_dim // 2 - rope_angles,), math.inf)])
    angles = (positions[..., None].float() / timescale)[..., None, :]  # (B, N, 1, Dh/2)
    first, second = x.chunk(2, dim=-1)
    return torch.cat([first * angles.cos() - second * angles.sin(), second * angles.cos() + first * angles.sin()], -1)


@pytest.mark.parametrize("p", [0.25, 0.5, 0.6, 0.75, 1.0])
@pytest.mark.parametrize("prefix", [0, 1])
def test_p_rope_is_the_authors_definition(p, prefix):
    n = 40
    pe = make_encoding("rope_1d", grid=(n,), dim=64, heads=2, prefix=prefix, rotate_fraction=p, layout="half")
    q = torch.randn(2, 2, prefix + n, 32)  # (B, H, P + N, Dh)
    rq, _ = pe.rotate_qk(q, q, (n,), 0)
    want = gemma_apply_rope(q[:, :, prefix:].transpose(1, 2), torch.arange(n).expand(2, n), 10000.0, p)
    torch.testing.assert_close(rq[:, :, prefix:], want.transpose(1, 2))  # (B, H, N, Dh)
    assert torch.equal(rq[:, :, :prefix], q[:, :, :prefix])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("p", [0.3, 0.5, 0.75])
def test_the_pairs_kept_are_the_highest_frequencies_per_axis(name, p):
    grid = GRIDS[name]
    pe = make_encoding(name, grid=grid, dim=64, heads=2, rotate_fraction=p)  # 16 pairs; 8 per axis in 2D
    per_axis = 16 // len(grid)
    kept = math.floor(p * per_axis)
    expected = torch.tensor([i < kept for _ in grid for i in range(per_axis)])
    assert torch.equal(pe.turning, expected[None, None, :])
    with torch.no_grad():
        rot = pe.rotation(grid, 0, CPU)
    still = ~expected
    assert torch.equal(rot[..., still], torch.ones_like(rot[..., still]))  # exactly 1 + 0j
    if name in ("rope_1d", "rope_2d"):  # fixed spectra: every kept frequency is above every dropped one
        inv = fn.rope_inv_freq(per_axis, pe.base)
        assert inv[:kept].min() > inv[kept:].max()


PARTIAL = [n for n in list_encodings() if "rotate_fraction" in get_encoding_class(n).option_names()]


def pair_speeds(pe) -> torch.Tensor:
    """(Dh/2,) |omega| of each pair, read from the encoding's frequencies (``freqs``: (..., Dh/2) or
    (..., Dh/2, 2) vectors, the same magnitudes for every block and head at initialization), or RoPE's
    own spectrum per axis where it keeps none."""
    pairs = pe.ctx.head_dim // 2
    freqs = getattr(pe, "freqs", None)
    if freqs is None:
        return fn.rope_inv_freq(pairs // pe.rot_axes, pe.base).repeat(pe.rot_axes)
    freqs = freqs.detach().float()
    mags = freqs.norm(dim=-1) if freqs.shape[-1] != pairs else freqs.abs()  # (..., Dh/2)
    mags = mags.reshape(-1, pairs)
    torch.testing.assert_close(mags, mags[:1].expand_as(mags))  # one spectrum for every block and head
    return mags[0]


def test_the_registry_list_holds_every_rotary_family():
    assert {"rope_1d", "rope_2d", "rope_2d_golden", "rope_2d_spiral"} <= set(PARTIAL)  # the list is not empty


@pytest.mark.parametrize("name", PARTIAL)
@pytest.mark.parametrize("p", [0.25, 0.5, 0.6, 0.75])
def test_the_pairs_left_still_are_the_lowest_frequencies_in_any_order(name, p):
    """The still pairs, read off the rotation table (exactly 1 + 0j everywhere), are the
    ceil((1 - p) n) lowest-|omega| of each group of n pairs (the axes of an axial spectrum; all
    the pairs where they are no axes), and no still pair is faster than a turning one."""
    grid = (12,) if 1 in get_encoding_class(name).grid_dims else (3, 5)
    pe = make_encoding(name, grid=grid, dim=64, heads=2, rotate_fraction=p)  # 16 pairs a head
    with torch.no_grad():
        rot = pe.rotation(grid, 0, CPU).reshape(-1, 16)  # (H*N or N, Dh/2)
    still = (rot == 1).all(dim=0)  # (Dh/2,)
    speeds = pair_speeds(pe)
    groups = pe.pair_groups()
    n = 16 // groups
    assert still.sum() == groups * math.ceil((1 - p) * n - 1e-9)
    for g in range(groups):
        s, v = still[g * n : (g + 1) * n], speeds[g * n : (g + 1) * n]
        assert v[s].max() <= v[~s].min(), (name, g, v, s)  # the lowest in the group
    assert speeds[still].max() <= speeds[~still].min()  # and the lowest of all
    full = make_encoding(name, grid=grid, dim=64, heads=2)
    with torch.no_grad():
        turned = (full.rotation(grid, 0, CPU).reshape(-1, 16) != 1).any(dim=0)
    assert turned[~still].all()  # every pair kept does turn


def test_golden_gate_leaves_its_first_pairs_still_where_its_frequencies_rise():
    """Golden Gate stores its magnitudes rising along the pairs (1 to 1e4): at p = 0.75 the still
    quarter is the first pairs, omega from 1 to about 8.6, not the last pairs (up to 1e4)."""
    pe = make_encoding("rope_2d_golden", grid=(3, 5), dim=64, heads=2, rotate_fraction=0.75)
    assert torch.equal(pe.turning.flatten(), torch.arange(16) >= 4)
    assert pair_speeds(pe)[:4].max() < 10 < 1000 < pair_speeds(pe)[4:].max()


def test_rotate_heads_turns_the_first_heads_only():
    pe = make_encoding("rope_2d", grid=(3, 5), dim=48, heads=3, rotate_heads=2)
    assert torch.equal(pe.turning.flatten(1).all(1), torch.tensor([True, True, False]))
    with torch.no_grad():
        rot = pe.rotation((3, 5), 0, CPU)  # (H, N, Dh/2)
    assert rot.shape == (3, 15, 8) and torch.equal(rot[2], torch.ones_like(rot[2]))
    assert torch.equal(rot[0], rot[1]) and not torch.equal(rot[0], rot[2])


@pytest.mark.parametrize("name", ["rope_2d", "rope_1d"])
def test_a_partial_rotation_is_still_one_cached_table(name):
    grid = GRIDS[name]
    pe = make_encoding(name, grid=grid, rotate_fraction=0.5, rotate_heads=1)
    assert pe.rotation(grid, 0, CPU) is pe.rotation(grid, 1, CPU)


def test_learned_frequencies_of_unrotated_pairs_get_no_gradient():
    pe = make_encoding("rope_2d_mixed", grid=(3, 5), rotate_fraction=0.5, rotate_heads=1)
    q = torch.randn(1, 2, 15, DH)
    rq, rk = pe.rotate_qk(q, q.clone(), (3, 5), 0)
    (rq @ rk.transpose(-1, -2)).square().sum().backward()
    grad = pe.freqs.grad[0]  # (H, Dh/2, 2)
    assert grad[1].abs().max() == 0 and grad[0, pe.turning[0, 0] == 0].abs().max() == 0
    assert grad[0, pe.turning[0, 0]].abs().min() > 0


def test_partial_rotation_compiles_in_one_graph():
    model = small_vit({"name": "rope_2d_mixed", "rotate_fraction": 0.5, "rotate_heads": 1}).train()
    explained = dynamo.explain(model)(torch.randn(2, 3, 16, 16))
    assert explained.graph_break_count == 0, [str(b.reason) for b in explained.break_reasons]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    "option,value,fix",
    [
        ("rotate_fraction", 0.0, "must be a number in (0, 1]"),
        ("rotate_fraction", 1.5, "must be a number in (0, 1]"),
        ("rotate_fraction", float("nan"), "must be a number in (0, 1]"),
        ("rotate_fraction", "half", "0.75: p-RoPE"),
        ("rotate_fraction", True, "1: every pair turns"),
        ("rotate_fraction", 0.1, "or use encoding=none"),  # floor(0.1 * 4 or 8) = 0 pairs
        ("rotate_heads", 0, "[1, model.num_heads=2]"),
        ("rotate_heads", 3, "[1, model.num_heads=2]"),
        ("rotate_heads", 1.0, "null (every head)"),
        ("rotate_heads", True, "null (every head)"),
    ],
)
def test_bad_values_name_the_option_and_the_fix(name, option, value, fix):
    with pytest.raises(OptionError, match=re.escape(fix)) as err:
        make_encoding(name, grid=GRIDS[name], **{option: value})
    assert err.value.option == f"encoding.{option}" and f"encoding.{option}" in str(err.value)
