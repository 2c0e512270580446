"""Every encoding against a reference implementation in an installed package.

timm (a runtime dependency), rotary-embedding-torch and Hugging Face
``transformers`` (dev dependencies: those tests fail, saying so, where absent).
Where the channel order differs by convention the test states the mapping and
compares after applying it. Tolerances: 1e-5 relative to the magnitudes
involved (tables and rotations are O(1); frequencies are compared with rtol).
"""

from __future__ import annotations

import math

import pytest
import torch
from conftest import make_encoding, require_reference
from timm.layers import (
    RotaryEmbeddingCat,
    RotaryEmbeddingMixed,
    apply_rot_embed_cat,
    build_sincos2d_pos_embed,
    gen_relative_position_index,
    resample_abs_pos_embed,
    resize_rel_pos_bias_table_simple,
)

from vitpos.encodings import EncodingContext, create_encoding
from vitpos.encodings import functional as fn

CPU = torch.device("cpu")
TOL = dict(rtol=1e-5, atol=1e-5)


def close(a, b, **tol):
    torch.testing.assert_close(a, b, **(tol or TOL))


# ------------------------------------------------------------------ sincos_2d
def test_sincos_2d_equals_timm_build_sincos2d_pos_embed_up_to_channel_order():
    ours = make_encoding("sincos_2d", grid=(4, 6), dim=32).table_for((4, 6), CPU)
    theirs = build_sincos2d_pos_embed([4, 6], dim=32)
    # mapping (D/4 = 8 channels per block): ours [sin y | cos y | sin x | cos x],
    # timm [sin y | sin x | cos y | cos x]
    q = 8
    perm = [*range(0, q), *range(2 * q, 3 * q), *range(q, 2 * q), *range(3 * q, 4 * q)]
    close(ours, theirs[:, perm])


# ------------------------------------------------------------ relative index
@pytest.mark.parametrize("grid", [(4, 4), (3, 5)])
@pytest.mark.parametrize("prefix", [0, 1])
def test_relative_index_and_bias_gather_equal_timm(grid, prefix):
    assert torch.equal(fn.relative_position_index_2d(*grid), gen_relative_position_index(grid))
    pe = make_encoding("rel_bias_2d", grid=grid, prefix=prefix)
    index = gen_relative_position_index(grid, class_token=bool(prefix))  # class entries appended, as BEiT
    n = index.shape[0]
    for block in range(2):
        expected = pe.tables[block][index.flatten()].reshape(n, n, -1).permute(2, 0, 1)  # (H, P+N, P+N)
        assert torch.equal(pe.attention_bias(grid, block, CPU, torch.float32), expected)


# -------------------------------------------------------------- table resize
RESIZES = [((8, 8), (4, 4)), ((8, 8), (6, 6)), ((8, 8), (12, 12)), ((4, 4), (7, 7)), ((6, 6), (4, 9)), ((5, 7), (5, 7))]


def timm_resize(table: torch.Tensor, old, new, antialias: bool, prefix: torch.Tensor | None = None) -> torch.Tensor:
    """timm's resample_abs_pos_embed of a (N, D) table, optionally behind prefix rows."""
    posemb = table if prefix is None else torch.cat([prefix, table])
    out = resample_abs_pos_embed(
        posemb[None], list(new), list(old), num_prefix_tokens=0 if prefix is None else len(prefix), antialias=antialias
    )[0]
    return out if prefix is None else out[len(prefix) :]


def default_antialias(old, new) -> bool:
    """vitpos's ``antialias=shrink``; timm antialiases always (the ``always`` option)."""
    return any(n < o for n, o in zip(new, old))


@pytest.mark.parametrize("old,new", RESIZES)
@pytest.mark.parametrize("antialias", ["shrink", "always"])
def test_learned_1d_image_resize_equals_timm(old, new, antialias):
    pe = make_encoding("learned_1d", grid=old, antialias=antialias)
    aa = antialias == "always" or default_antialias(old, new)
    close(pe.table_for(new), timm_resize(pe.table.detach(), old, new, aa))


@pytest.mark.parametrize("old,new", RESIZES)
@pytest.mark.parametrize("antialias", ["shrink", "always"])
def test_learned_2d_resize_equals_timm_on_the_full_table(old, new, antialias):
    # the full (h*w, D) table [row_y | col_x] resized by timm must equal resizing rows and columns alone
    pe = make_encoding("learned_2d", grid=old, antialias=antialias)
    full = pe.table_for(old).detach()
    aa = antialias == "always" or default_antialias(old, new)
    close(pe.table_for(new), timm_resize(full, old, new, aa))


def test_learned_2d_keeps_distinct_rows_on_a_smaller_grid():
    # the trap of antialiased bicubic on an image one pixel wide: the (h, 1) layout gave every row the first
    # row's vector
    pe = create_encoding("learned_2d", EncodingContext(dim=64, num_heads=4, depth=1, grid=(8, 8)))
    t = pe.table_for((4, 4)).reshape(4, 4, 64)
    row_parts = t[:, 0, :32]
    assert (row_parts[1:] - row_parts[0]).abs().amax(-1).min() > 1e-3
    col_parts = t[0, :, 32:]
    assert (col_parts[1:] - col_parts[0]).abs().amax(-1).min() > 1e-3


@pytest.mark.parametrize("n_new", [1, 3, 5, 12])
@pytest.mark.parametrize("antialias", [False, True])
def test_one_axis_bicubic_resize_equals_timm_on_a_constant_other_axis(n_new, antialias):
    table = torch.randn(8, 6)
    wide = table[:, None, :].expand(8, 4, 6).reshape(32, 6)  # (8*4, D), constant along x
    expected = timm_resize(wide, (8, 4), (n_new, 4), antialias).reshape(n_new, 4, 6)[:, 0]
    close(fn.resample_axis_bicubic(table, n_new, antialias), expected)


def test_2d_resize_to_one_column_avoids_the_width_one_antialias_trap():
    # PyTorch's antialiased bicubic returns the first row when the output is one pixel wide;
    # the reference is timm's resize of the transposed grid (output (1, 4) is wide)
    table = torch.randn(8 * 8, 6)
    transposed = table.reshape(8, 8, 6).transpose(0, 1).reshape(64, 6)
    expected = timm_resize(transposed, (8, 8), (1, 4), True).reshape(1, 4, 6).transpose(0, 1).reshape(4, 6)
    close(fn.resample_table_2d(table, (8, 8), (4, 1)), expected)


def test_learned_1d_resize_with_a_class_token_equals_timm():
    # vitpos adds the table before the class token is concatenated, so the class token has no
    # position vector; timm's resize with num_prefix_tokens=1 must leave the grid part identical
    pe = make_encoding("learned_1d", grid=(8, 8), prefix=1)
    cls_pos = torch.randn(1, 32)
    close(pe.table_for((5, 5)), timm_resize(pe.table.detach(), (8, 8), (5, 5), True, prefix=cls_pos))


@pytest.mark.parametrize("n_new", [5, 16, 40, 64])
def test_learned_1d_sequence_resize_slices_down_and_interpolates_up(n_new):
    pe = make_encoding("learned_1d", grid=(16,))
    table = pe.table.detach()
    got = pe.table_for((n_new,))
    if n_new <= 16:
        assert torch.equal(got, table[:n_new])  # the trained positions themselves
        return
    # linear with the ends on the ends: numpy's interp at positions i * 15 / (n_new - 1)
    x = torch.arange(n_new, dtype=torch.float64) * 15 / (n_new - 1)
    lo = x.floor().long().clamp(max=14)
    frac = (x - lo)[:, None]
    expected = (table.double()[lo] * (1 - frac) + table.double()[lo + 1] * frac).float()
    close(got, expected)


@pytest.mark.parametrize("old,new", [((4, 4), (2, 2)), ((4, 4), (6, 6)), ((6, 6), (3, 3)), ((3, 3), (8, 8))])
@pytest.mark.parametrize("prefix", [0, 1])
def test_relative_bias_table_resize_equals_timm(old, new, prefix):
    pe = make_encoding("rel_bias_2d", grid=old, prefix=prefix)
    table = pe.tables[1].detach()  # (E, H), offsets then the 3 class entries
    entries = (2 * new[0] - 1) * (2 * new[1] - 1) + 3 * prefix
    expected = resize_rel_pos_bias_table_simple(table, new, (entries, table.shape[1]))
    close(pe.offset_table(1, new), expected)


# ---------------------------------------------------------------------- RoPE
def _lucidrains():
    return require_reference("rotary_embedding_torch")


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("strategy,scale", [("extrapolate", None), ("interpolate", 4.0)])
def test_rope_1d_equals_rotary_embedding_torch(layout, strategy, scale):
    lib = _lucidrains()
    head_dim, n = 16, 40
    pe = make_encoding("rope_1d", grid=(10,), dim=32, heads=2, layout=layout, strategy=strategy, scale=scale)
    ref = lib.RotaryEmbedding(dim=head_dim, theta=10000, interpolate_factor=scale or 1.0)
    q = torch.randn(2, 2, n, head_dim)
    ours, _ = pe.rotate_qk(q, q, (n,), 0)
    if layout == "interleaved":  # rotary-embedding-torch pairs (2i, 2i+1), as ours
        close(ours, ref.rotate_queries_or_keys(q))
        return
    # mapping: our half layout pairs (i, i + Dh/2); channel perm[2i] = i, perm[2i+1] = i + Dh/2
    # takes it to the interleaved pairs the reference rotates
    perm = torch.stack([torch.arange(head_dim // 2), torch.arange(head_dim // 2) + head_dim // 2], -1).flatten()
    close(ours[..., perm], ref.rotate_queries_or_keys(q[..., perm]))


@pytest.mark.parametrize("grid", [(4, 4), (3, 5)])
@pytest.mark.parametrize("eval_grid", [None, (6, 7)])
def test_rope_2d_equals_timm_rotary_embedding_cat(grid, eval_grid):
    # timm with grid_indexing='xy' puts the x bands first, as ours: channels map one to one
    # (with 'ij' the two halves swap). temperature = base, in_pixels=False: bands base^(-4i/Dh)
    pe = make_encoding("rope_2d", grid=grid, dim=32, heads=2)
    target = eval_grid or grid  # extrapolate: integer positions on the new grid
    emb = RotaryEmbeddingCat(dim=16, temperature=100, in_pixels=False, grid_indexing="xy").get_embed(list(target))
    q = torch.randn(2, 2, math.prod(target), 16)
    ours, _ = pe.rotate_qk(q, q, target, 0)
    close(ours, apply_rot_embed_cat(q, emb))


def test_rope_2d_interpolate_with_ratio_align_equals_timm_ref_feat_shape():
    # timm's ref_feat_shape (EVA) maps positions by n_train / n: our align=ratio
    pe = make_encoding("rope_2d", grid=(4, 4), dim=32, heads=2, strategy="interpolate", align="ratio")
    ref = RotaryEmbeddingCat(dim=16, temperature=100, in_pixels=False, grid_indexing="xy", ref_feat_shape=[4, 4])
    q = torch.randn(1, 2, 48, 16)
    ours, _ = pe.rotate_qk(q, q, (6, 8), 0)
    close(ours, apply_rot_embed_cat(q, ref.get_embed([6, 8])))


def test_rope_2d_mixed_initial_frequencies_and_rotation_equal_timm():
    depth, heads, dim = 2, 2, 32
    torch.manual_seed(3)
    ours = create_encoding("rope_2d_mixed", EncodingContext(dim, heads, depth, (4, 5)))
    torch.manual_seed(3)  # the same single torch.rand draw of the per-head directions
    ref = RotaryEmbeddingMixed(dim, depth, heads, temperature=10.0)  # grid_indexing='xy': t_x, t_y as ours
    # mapping: ours (depth, H, Dh/2, 2=[fx, fy]); timm (2=[fx, fy], depth, H, Dh/2)
    close(ours.freqs.detach(), ref.freqs.detach().permute(1, 2, 3, 0))
    emb = ref.get_embed([4, 5])  # (depth, H, N, 2 Dh), interleaved pairs as ours
    q = torch.randn(2, heads, 20, 16)
    for block in range(depth):
        got, _ = ours.rotate_qk(q, q, (4, 5), block)
        close(got, apply_rot_embed_cat(q, emb[block]))


# ----------------------------------------------------------------------- CPE
@pytest.mark.parametrize("prefix", [0, 1])
def test_cpe_equals_timm_posconv(prefix):
    from timm.models.twins import PosConv

    pe = make_encoding("cpe", grid=(4, 5), prefix=prefix)
    ref = PosConv(in_chans=32, embed_dim=32, stride=1)
    ref.proj[0].load_state_dict(pe.convs["0"].state_dict())
    x = torch.randn(2, prefix + 20, 32)
    out = pe.after_block(x, (4, 5), 0)
    close(out[:, prefix:], ref(x[:, prefix:], (4, 5)))
    assert torch.equal(out[:, :prefix], x[:, :prefix])  # the class token passes around the convolution


# --------------------------------------------------- transformers references
def hf_rope(rope_type: str, head_dim: int, base: float, train_length: int, **params):
    """HF's (inv_freq, attention_factor) for a Llama config with these RoPE parameters."""
    require_reference("transformers")
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    seq_len = params.pop("seq_len", None)
    rope = {"rope_type": rope_type, "rope_theta": base, **params}
    if rope_type == "yarn":
        rope["original_max_position_embeddings"] = train_length
    config = LlamaConfig(
        hidden_size=4 * head_dim, num_attention_heads=4, max_position_embeddings=train_length, rope_parameters=rope
    )
    inv_freq, factor = ROPE_INIT_FUNCTIONS[rope_type](config, None, seq_len=seq_len)
    return inv_freq.float(), factor


def rope_1d_rotation(strategy, train_length, n, head_dim=64, **kw):
    pe = create_encoding("rope_1d", EncodingContext(4 * head_dim, 4, 1, (train_length,)), strategy=strategy, **kw)
    return pe.rotation((n,), 0, CPU)  # (n, Dh/2) complex


def angles_of(inv_freq: torch.Tensor, n: int, magnitude: float = 1.0) -> torch.Tensor:
    return fn.rope_angles_to_complex(torch.outer(torch.arange(n, dtype=torch.float32), inv_freq), magnitude)


@pytest.mark.parametrize("scale", [2.0, 4.0, 8.0])
def test_rope_linear_and_ntk_equal_transformers(scale):
    base, head_dim, train, n = 10000.0, 64, 64, 200
    inv_freq, _ = hf_rope("linear", head_dim, base, train, factor=scale)
    close(rope_1d_rotation("interpolate", train, n, scale=scale), angles_of(inv_freq, n))
    # static NTK is HF's dynamic at a length of s * L with factor 1 (base * s^(d/(d-2)))
    inv_freq, _ = hf_rope("dynamic", head_dim, base, train, factor=1.0, seq_len=int(scale * train))
    close(rope_1d_rotation("ntk", train, n, scale=scale), angles_of(inv_freq, n))


@pytest.mark.parametrize("n", [32, 64, 100, 256])
def test_rope_dynamic_ntk_equals_transformers_with_factor_one(n):
    # ours is the original dynamic NTK, s = max(1, n / L); HF's factor f generalizes it as
    # s = f n / L - (f - 1), which is ours at f = 1
    inv_freq, _ = hf_rope("dynamic", 64, 10000.0, 64, factor=1.0, seq_len=n)
    close(rope_1d_rotation("dynamic", 64, n), angles_of(inv_freq, n))


@pytest.mark.parametrize("train_length", [64, 2048])
@pytest.mark.parametrize("scale", [2.0, 4.0, 8.0])
def test_yarn_equals_transformers_compute_yarn_parameters(train_length, scale):
    base, head_dim = 10000.0, 64
    inv_freq, factor = hf_rope("yarn", head_dim, base, train_length, factor=scale)
    ours = fn.yarn_inv_freq(fn.rope_inv_freq(head_dim // 2, base), scale, train_length, base=base)
    close(ours, inv_freq, rtol=1e-6, atol=0)
    assert fn.yarn_attention_factor(scale) == pytest.approx(factor, rel=1e-7)
    # the module at s = n / L: position 1 turns each pair by its frequency, and the magnitude on
    # q and k alike is the factor (HF multiplies cos and sin by it). Farther positions only add
    # float32 rounding of p * theta (about p ulps), the same in both implementations.
    rot = rope_1d_rotation("yarn", train_length, int(scale * train_length), head_dim)
    close(rot[1].angle(), inv_freq, rtol=1e-5, atol=0)
    close(rot.abs(), torch.full(rot.shape, factor))


def test_yarn_paper_ramp_differs_from_released_code_where_the_issue_says():
    # at L = 64, s = 8 the paper's ramp divides the fastest pair, the released code keeps it
    inv = fn.rope_inv_freq(32, 10000.0)
    paper = fn.yarn_inv_freq(inv, 8.0, 64, ramp="turns")
    released, _ = hf_rope("yarn", 64, 10000.0, 64, factor=8.0)
    assert released[0] == inv[0] and paper[0] < inv[0]
    assert (paper - released).abs().max() == pytest.approx(0.616, abs=1e-3)


@pytest.mark.parametrize("scale", [2.0, 4.0])
def test_rope_2d_yarn_is_hf_yarn_per_axis(scale):
    # each axis of 2D RoPE is a 1D RoPE of width Dh/2 with base^(-4i/Dh) = base^(-2i/(Dh/2))
    head_dim, base, side = 32, 100.0, 8
    pe = make_encoding("rope_2d", grid=(side, side), dim=2 * head_dim, heads=2, strategy="yarn")
    new = int(scale * side)
    rot = pe.rotation((new, new), 0, CPU).reshape(new, new, head_dim // 2)
    inv_freq, factor = hf_rope("yarn", head_dim // 2, base, side, factor=scale)
    x_part = rot[0, :, : head_dim // 4]  # row 0: the x pairs turn with the column
    y_part = rot[:, 0, head_dim // 4 :]  # column 0: the y pairs turn with the row
    close(x_part, angles_of(inv_freq, new, factor))
    close(y_part, angles_of(inv_freq, new, factor))


# -------------------------------------------------------------- ALiBi and T5
@pytest.mark.parametrize("heads", [1, 2, 4, 6, 8, 12, 16, 20])
def test_alibi_slopes_equal_transformers_bloom(heads):
    require_reference("transformers")
    from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

    close(fn.alibi_slopes(heads).float(), _get_alibi_slopes(heads, CPU), rtol=1e-6, atol=0)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("buckets,max_distance", [(32, 128), (16, 64), (8, 20)])
def test_t5_buckets_equal_transformers(bidirectional, buckets, max_distance):
    require_reference("transformers")
    from transformers.models.t5.modeling_t5 import T5Attention

    from vitpos.encodings.t5_bias import t5_relative_bucket

    offset = torch.arange(-300, 301)  # key - query, as HF's memory_position - context_position
    expected = T5Attention._relative_position_bucket(offset, bidirectional, buckets, max_distance)
    assert torch.equal(t5_relative_bucket(offset, buckets, max_distance, bidirectional), expected)


def test_yarn_attention_factor_scales_every_logit_alike_with_a_class_token():
    # rope_2d + yarn + a class token (model.pool=cls): cls-patch, patch-cls, cls-cls and
    # patch-patch logits all get (0.1 ln s + 1)^2 relative to the unit-magnitude rotation
    from conftest import small_vit

    model = small_vit({"name": "rope_2d", "strategy": "yarn"}, pool="cls")
    pe = model.pos
    grid = (8, 8)  # trained on 4x4: s = 2 per axis
    q = torch.randn(1, 2, 65, 16)
    k = torch.randn(1, 2, 65, 16)
    q2, k2 = pe.rotate_qk(q, k, grid, 0)
    m = 0.1 * math.log(2.0) + 1
    unit = pe.rotation(grid, 0, CPU) / m  # the pure rotation
    qu = torch.cat([q[:, :, :1], fn.apply_rotary(q[:, :, 1:], unit)], 2)
    ku = torch.cat([k[:, :, :1], fn.apply_rotary(k[:, :, 1:], unit)], 2)
    close(q2 @ k2.transpose(-1, -2), m**2 * (qu @ ku.transpose(-1, -2)))
    with torch.no_grad():
        model.pos.strategy = "yarn"
        assert torch.isfinite(model(torch.randn(1, 3, 32, 32))).all()
