"""Math properties of the image encodings, and the model-level properties
parametrized over the whole registry (so new encodings are covered)."""

import itertools

import pytest
import torch
from conftest import make_encoding, small_vit
from timm.layers.pos_embed_rel import gen_relative_position_index

from vitpos.encodings import functional as fn
from vitpos.encodings import list_encodings

IMAGE_ENCODINGS = list_encodings(2)


def permute_patches(images, perm, p=4):
    b, c, h, w = images.shape
    gh, gw = h // p, w // p
    x = images.reshape(b, c, gh, p, gw, p).permute(0, 2, 4, 1, 3, 5).reshape(b, gh * gw, c, p, p)
    x = x[:, perm]  # (B, N, C, p, p) in the new order
    return x.reshape(b, gh, gw, c, p, p).permute(0, 3, 1, 4, 2, 5).reshape(b, c, h, w)


@pytest.mark.parametrize("name", IMAGE_ENCODINGS)
def test_only_none_is_invariant_to_permuting_patches(name):
    model = small_vit(name)
    with torch.no_grad():  # weights of a generic scale: at the 0.02 init attention is nearly uniform
        for p in model.parameters():
            p.normal_(0, 0.3)
    images = torch.randn(2, 3, 16, 16)
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = model.forward_features(images), model.forward_features(permute_patches(images, perm))
    if name == "none":
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    else:
        assert (a - b).abs().max() > 1e-3 * a.abs().max(), f"{name} ignores where patches are"


@pytest.mark.parametrize("name", IMAGE_ENCODINGS)
@pytest.mark.parametrize("pool", ["gap", "cls"])
def test_gradients_reach_every_position_parameter(name, pool):
    model = small_vit(name, pool=pool).train()
    model(torch.randn(2, 3, 16, 16)).square().sum().backward()
    for pname, p in model.pos.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, f"no gradient for {name}.{pname}"


def test_sincos_2d_rows_distinct_bounded_and_offset_only():
    table = fn.sincos_2d(torch.arange(6.0), torch.arange(5.0), 32)  # (30, 32)
    assert table.abs().max() <= 1.0
    assert torch.cdist(table, table).add(torch.eye(30) * 10).min() > 1e-3  # distinct rows
    coords = [(y, x) for y in range(6) for x in range(5)]
    dots = table @ table.t()
    half = 16
    by_offset = {}
    for i, j in itertools.product(range(30), repeat=2):
        dy, dx = coords[i][0] - coords[j][0], coords[i][1] - coords[j][1]
        row_dot, col_dot = table[i, :half] @ table[j, :half], table[i, half:] @ table[j, half:]
        by_offset.setdefault(("y", dy), []).append(row_dot)
        by_offset.setdefault(("x", dx), []).append(col_dot)
        by_offset.setdefault((dy, dx), []).append(dots[i, j])
    for values in by_offset.values():
        assert torch.stack(values).std(unbiased=False) < 1e-5


def test_learned_2d_tokens_in_one_column_share_the_column_part():
    pe = make_encoding("learned_2d", grid=(4, 5))
    table = pe.table_for((4, 5)).reshape(4, 5, -1)
    cols, rows = table[..., 16:], table[..., :16]
    assert torch.equal(cols, cols[:1].expand_as(cols))
    assert torch.equal(rows, rows[:, :1].expand_as(rows))
    assert not torch.equal(cols[:, 0], cols[:, 1])


# ---------------------------------------------------------------- relative bias
def test_relative_index_is_a_bijection_onto_offsets_and_matches_timm():
    h, w = 4, 6
    index = fn.relative_position_index_2d(h, w)
    assert torch.equal(index, gen_relative_position_index((h, w)))
    assert set(index.flatten().tolist()) == set(range((2 * h - 1) * (2 * w - 1)))
    coords = [(y, x) for y in range(h) for x in range(w)]
    seen = {}
    for i, j in itertools.product(range(h * w), repeat=2):
        off = (coords[i][0] - coords[j][0], coords[i][1] - coords[j][1])
        assert seen.setdefault(int(index[i, j]), off) == off


@pytest.mark.parametrize("prefix", [0, 1])
def test_relative_bias_is_equal_for_equal_offsets(prefix):
    pe = make_encoding("rel_bias_2d", grid=(4, 4), prefix=prefix)
    bias = pe.attention_bias((4, 4), 1, torch.device("cpu"), torch.float32)  # (H, P+N, P+N)
    assert bias.shape == (2, 16 + prefix, 16 + prefix)
    patch = bias[:, prefix:, prefix:]
    index = fn.relative_position_index_2d(4, 4)
    for k in index.unique():
        values = patch[:, index == k]  # (H, pairs with that offset)
        assert torch.equal(values, values[:, :1].expand_as(values))
    if prefix:  # the class token's own entries, laid out as timm's class_token index
        timm_index = gen_relative_position_index((4, 4), class_token=True)
        table = pe.tables[1]
        torch.testing.assert_close(bias, table[timm_index.flatten()].reshape(17, 17, 2).permute(2, 0, 1))


def test_relative_bias_per_block_or_shared():
    per_block = make_encoding("rel_bias_2d")
    shared = make_encoding("rel_bias_2d", shared=True)
    assert per_block.tables.shape[0] == 2 and shared.tables.shape[0] == 1
    dev, dt = torch.device("cpu"), torch.float32
    assert not torch.equal(per_block.attention_bias((4, 4), 0, dev, dt), per_block.attention_bias((4, 4), 1, dev, dt))
    assert torch.equal(shared.attention_bias((4, 4), 0, dev, dt), shared.attention_bias((4, 4), 1, dev, dt))


# ------------------------------------------------------------------------- CPE
def test_cpe_is_translation_equivariant_away_from_borders():
    pe = make_encoding("cpe", grid=(8, 8))
    x = torch.randn(1, 64, 32)
    shifted = x.reshape(1, 8, 8, 32).roll((1, 1), (1, 2)).reshape(1, 64, 32)
    out = pe.after_block(x, (8, 8), 0).reshape(8, 8, 32)
    out_shifted = pe.after_block(shifted, (8, 8), 0).reshape(8, 8, 32)
    # interior cells whose 3x3 neighbourhood never touches the border or the wrap-around
    torch.testing.assert_close(out_shifted[2:7, 2:7], out[1:6, 1:6])
    assert not torch.allclose(out_shifted[0, 0], out[7, 7])  # borders see the zero padding


def test_cpe_leaves_the_class_token_alone_and_only_acts_after_its_blocks():
    pe = make_encoding("cpe", grid=(4, 4), prefix=1)
    x = torch.randn(2, 17, 32)
    y = pe.after_block(x, (4, 4), 0)
    assert torch.equal(y[:, 0], x[:, 0]) and not torch.equal(y[:, 1:], x[:, 1:])
    assert torch.equal(pe.after_block(x, (4, 4), 1), x)
