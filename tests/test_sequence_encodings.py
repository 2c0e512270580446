"""Math properties of the 1D encodings: RoPE and its length-scaling rules, ALiBi, T5 buckets."""

from __future__ import annotations

import math

import pytest
import torch

from bench.references import rotate_half_reference
from vitpos.encodings import EncodingContext, create_encoding
from vitpos.encodings import functional as fn
from vitpos.encodings.alibi import alibi_bias
from vitpos.encodings.t5_bias import t5_relative_bucket

HEAD_DIM = 16  # 8 rotary pairs
CTX = EncodingContext(dim=4 * HEAD_DIM, num_heads=4, depth=2, grid=(32,))


def rope(strategy="extrapolate", ctx=CTX, **kw):
    return create_encoding("rope_1d", ctx, strategy=strategy, **kw)


def plain_rotation(positions: torch.Tensor, inv_freq: torch.Tensor, magnitude: float = 1.0) -> torch.Tensor:
    return fn.rope_angles_to_complex(torch.outer(positions.float(), inv_freq), magnitude)


def repeated_logits(pe, n: int, seed: int = 0) -> torch.Tensor:
    """Logits (H, n, n) when every position holds the same q and the same k:
    whatever varies across the matrix comes from the encoding alone."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, CTX.num_heads, 1, HEAD_DIM, generator=g).expand(1, -1, n, -1)
    k = torch.randn(1, CTX.num_heads, 1, HEAD_DIM, generator=g).expand(1, -1, n, -1)
    q, k = pe.rotate_qk(q, k, (n,), 0)
    return (q @ k.transpose(-1, -2))[0]


# ------------------------------------------------------------------------- RoPE
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rope_logits_depend_only_on_offset(layout):
    logits = repeated_logits(rope(layout=layout), 24)
    for offset in range(-23, 24):
        diagonal = logits.diagonal(offset, dim1=-2, dim2=-1)  # all (m, n) with n - m = offset
        assert torch.allclose(diagonal, diagonal[:, :1].expand_as(diagonal), atol=1e-4)
    assert not torch.allclose(logits[:, 0, 0], logits[:, 0, 5], atol=1e-3)  # offsets do matter


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rope_preserves_norms(layout):
    x = torch.randn(2, CTX.num_heads, 40, HEAD_DIM)
    q, k = rope(layout=layout).rotate_qk(x, x.clone(), (40,), 0)  # beyond the training length too
    assert torch.allclose(q.norm(dim=-1), x.norm(dim=-1), atol=1e-5)
    assert torch.allclose(k.norm(dim=-1), x.norm(dim=-1), atol=1e-5)


def test_half_and_interleaved_layouts_differ_by_a_channel_permutation():
    # pair i is channels (2i, 2i+1) interleaved, (i, i + Dh/2) half
    half = HEAD_DIM // 2
    perm = torch.stack([torch.arange(half), torch.arange(half) + half], -1).flatten()  # interleaved <- half
    x = torch.randn(3, 4, 10, HEAD_DIM)
    rot = plain_rotation(torch.arange(10), fn.rope_inv_freq(half, 10000.0))
    via_interleaved = fn.apply_rotary(x[..., perm], rot, "interleaved")
    assert torch.allclose(fn.apply_rotary(x, rot, "half")[..., perm], via_interleaved, atol=1e-6)
    cos, sin = rot.real.float(), rot.imag.float()
    assert torch.allclose(fn.apply_rotary(x, rot, "half"), rotate_half_reference(x, cos, sin), atol=1e-6)
    # so the two modules give the same logits once q and k are permuted alike
    q, k = torch.randn(2, 1, 4, 12, HEAD_DIM).unbind(0)
    qi, ki = rope(layout="interleaved").rotate_qk(q[..., perm], k[..., perm], (12,), 0)
    qh, kh = rope(layout="half").rotate_qk(q, k, (12,), 0)
    assert torch.allclose(qi @ ki.transpose(-1, -2), qh @ kh.transpose(-1, -2), atol=1e-5)


# ------------------------------------------------------------- scaling methods
STRATEGIES = ["extrapolate", "interpolate", "linear", "ntk", "dynamic", "yarn"]
INV_FREQ = fn.rope_inv_freq(HEAD_DIM // 2, 10000.0)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("n", [8, 32])
def test_every_strategy_is_plain_rope_at_scale_one(strategy, n):
    expected = plain_rotation(torch.arange(n), INV_FREQ)
    assert torch.allclose(rope(strategy).rotation((n,), 0, "cpu"), expected, atol=1e-6)
    if strategy != "dynamic":  # a fixed scale of 1 too
        assert torch.allclose(
            rope(strategy, scale=1.0).rotation((64,), 0, "cpu"), plain_rotation(torch.arange(64), INV_FREQ), atol=1e-5
        )


def test_linear_divides_positions_by_the_scale():
    pe = rope("linear")
    assert pe.strategy == "interpolate"
    expected = plain_rotation(torch.arange(128) / 4, INV_FREQ)  # s = 128 / 32
    assert torch.allclose(pe.rotation((128,), 0, "cpu"), expected, atol=1e-5)
    fixed = rope("linear", scale=2.0).rotation((48,), 0, "cpu")
    assert torch.allclose(fixed, plain_rotation(torch.arange(48) / 2, INV_FREQ), atol=1e-5)


def test_ntk_scales_the_base():
    assert fn.ntk_base(10000.0, 2.0, 16) == pytest.approx(22081.790273476247)  # 10000 * 2^(16/14)
    for n, s in [(64, 2.0), (128, 4.0)]:
        base = 10000.0 * s ** (HEAD_DIM / (HEAD_DIM - 2))
        expected = plain_rotation(torch.arange(n), fn.rope_inv_freq(HEAD_DIM // 2, base))
        got = rope("ntk").rotation((n,), 0, "cpu")
        assert torch.allclose(got, expected, atol=1e-4)
        assert torch.allclose(got[:, 0], plain_rotation(torch.arange(n), INV_FREQ)[:, 0])  # top frequency kept


def test_dynamic_is_plain_rope_up_to_the_training_length_then_ntk():
    for n in (1, 17, 32):
        assert torch.allclose(rope("dynamic").rotation((n,), 0, "cpu"), plain_rotation(torch.arange(n), INV_FREQ))
    # beyond: NTK with s = n / n_train, ignoring a fixed scale
    assert torch.allclose(rope("dynamic", scale=8.0).rotation((96,), 0, "cpu"), rope("ntk").rotation((96,), 0, "cpu"))


def test_yarn_paper_ramp_matches_hand_computed_values():
    # Dh = 16, base 10^4, training length 1024, s = 4, beta 32 / 1: turns r_i = 1024 * theta_i / (2 pi)
    # = 163, 51.5 (kept), 16.3, 5.15, 1.63 (ramp: gamma = (r - 1) / 31), 0.52, 0.16, 0.05 (divided by 4)
    got = fn.yarn_inv_freq(INV_FREQ, 4.0, 1024, ramp="turns")
    expected = torch.tensor([1.0, 0.316228, 0.06201, 0.0110836, 0.00265236, 0.000790569, 0.00025, 7.90569e-05])
    assert torch.allclose(got, expected, rtol=1e-4)
    assert torch.equal(fn.yarn_inv_freq(INV_FREQ, 1.0, 1024, ramp="turns"), INV_FREQ)


def test_yarn_released_ramp_matches_hand_computed_values():
    # pair index where r = beta: i = 16 ln(1024 / (2 pi beta)) / (2 ln 10^4): 1.41 -> floor 1 (beta 32),
    # 4.42 -> ceil 5 (beta 1); gamma = 1 - clamp((i - 1) / 4) = 1, 1, .75, .5, .25, 0, 0, 0
    assert fn.yarn_correction_range(8, 1e4, 1024, 32.0, 1.0) == (1, 5)
    got = fn.yarn_inv_freq(INV_FREQ, 4.0, 1024, base=1e4)
    expected = torch.tensor([1.0, 0.316228, 0.08125, 0.0197642, 0.004375, 0.000790569, 0.00025, 7.90569e-05])
    assert torch.allclose(got, expected, rtol=1e-5)
    assert torch.equal(fn.yarn_inv_freq(INV_FREQ, 1.0, 1024, base=1e4), INV_FREQ)
    with pytest.raises(ValueError, match="encoding.yarn_ramp"):
        fn.yarn_inv_freq(INV_FREQ, 4.0, 1024, ramp="paper")
    with pytest.raises(ValueError, match="valid: index .* turns"):
        rope("yarn", yarn_ramp="paper")


@pytest.mark.parametrize("ramp", ["index", "turns"])
def test_rope_1d_yarn_module_uses_the_chosen_ramp(ramp):
    ctx = EncodingContext(dim=4 * HEAD_DIM, num_heads=4, depth=2, grid=(1024,))
    rot = rope("yarn", ctx=ctx, yarn_ramp=ramp).rotation((4096,), 0, "cpu")
    freqs = fn.yarn_inv_freq(INV_FREQ, 4.0, 1024, ramp=ramp, base=1e4)
    torch.testing.assert_close(rot[1] / rot[1].abs(), torch.polar(torch.ones(8), freqs))


def test_yarn_attention_factor_and_module():
    assert fn.yarn_attention_factor(1.0) == 1.0
    for s in (2.0, 4.0, 16.0):
        assert fn.yarn_attention_factor(s) == pytest.approx(0.1 * math.log(s) + 1)
    ctx = EncodingContext(dim=4 * HEAD_DIM, num_heads=4, depth=2, grid=(1024,))
    rot = rope("yarn", ctx=ctx).rotation((4096,), 0, "cpu")
    mag = 0.1 * math.log(4) + 1  # applied to q and k alike: logits scale by mag^2
    expected = plain_rotation(torch.arange(4096), fn.yarn_inv_freq(INV_FREQ, 4.0, 1024, base=1e4), mag)
    assert torch.allclose(rot, expected, atol=1e-4)
    assert torch.allclose(rot.abs(), torch.full(rot.shape, mag), atol=1e-5)


# ------------------------------------------------------------------------ ALiBi
def test_alibi_slopes_follow_the_paper():
    assert torch.allclose(fn.alibi_slopes(8), torch.tensor([2.0**-i for i in range(1, 9)]))
    # not a power of two: the 4 slopes of H=4, then every other slope of H=8
    assert torch.allclose(fn.alibi_slopes(6), torch.tensor([2.0**-e for e in (2, 4, 6, 8, 1, 3)]))
    # H=12: the 8 slopes of H=8, then slopes 1, 3, 5, 7 of H=16 (2^-0.5, 2^-1.5, ...)
    twelve = [2.0**-e for e in (1, 2, 3, 4, 5, 6, 7, 8, 0.5, 1.5, 2.5, 3.5)]
    assert torch.allclose(fn.alibi_slopes(12), torch.tensor(twelve))


def test_alibi_bias_is_minus_slope_times_distance():
    ctx = EncodingContext(dim=64, num_heads=8, depth=2, grid=(16,))
    pe = create_encoding("alibi", ctx)
    bias = pe.attention_bias((40,), 1, torch.device("cpu"), torch.float32)  # any length
    i, j = torch.meshgrid(torch.arange(40), torch.arange(40), indexing="ij")
    slopes = fn.alibi_slopes(8)[:, None, None]
    assert torch.allclose(bias, -slopes * (i - j).abs())
    visible = j <= i  # under a causal mask it is the paper's -m (i - j)
    assert torch.allclose(bias[:, visible], (-slopes * (i - j))[:, visible])
    assert pe.attention_bias((40,), 0, torch.device("cpu"), torch.float32) is bias  # cached, shared by blocks
    assert torch.equal(alibi_bias(fn.alibi_slopes(8), 10), bias[:, :10, :10])
    assert pe.no_weight_decay() == set() and not list(pe.parameters())


def test_alibi_is_sequence_only():
    with pytest.raises(ValueError, match="sequence"):
        create_encoding("alibi", EncodingContext(dim=64, num_heads=4, depth=2, grid=(4, 4)))


# --------------------------------------------------------------------- T5 bias
def test_t5_buckets_exact_monotone_and_saturating():
    d = torch.arange(0, 400)
    for bidirectional, last in ((True, 15), (False, 31)):
        past = t5_relative_bucket(-d, 32, 128, bidirectional)  # keys before the query
        exact = 8 if bidirectional else 16
        assert torch.equal(past[:exact], d[:exact])  # one bucket per small distance
        assert (past.diff() >= 0).all() and (past.diff() <= 1).all()  # monotone, no bucket skipped
        assert (past[128:] == last).all()  # saturated from max_distance on
        assert past.max() == last
    future = t5_relative_bucket(d, 32, 128, True)
    assert future[0] == 0 and torch.equal(future[1:8], 16 + d[1:8])  # the other half of the buckets
    assert (future[128:] == 31).all()
    assert (t5_relative_bucket(d, 32, 128, False) == 0).all()  # causal: the future shares bucket 0
    # log-spaced middle, as T5: distance 12 -> 8 + floor(log(12/8) / log(128/8) * 8) = 9
    assert t5_relative_bucket(torch.tensor([-12, 12]), 32, 128, True).tolist() == [9, 25]


@pytest.mark.parametrize("shared", [True, False])
def test_t5_bias_reads_the_table(shared):
    ctx = EncodingContext(dim=64, num_heads=4, depth=3, grid=(16,))
    pe = create_encoding("rel_bias_1d", ctx, shared=shared, num_buckets=16, max_distance=32)
    assert pe.tables.shape == (1 if shared else 3, 16, 4)
    n = 50  # longer than in training: saturated buckets
    for block in range(3):
        bias = pe.attention_bias((n,), block, torch.device("cpu"), torch.float32)
        pos = torch.arange(n)
        index = t5_relative_bucket(pos[None] - pos[:, None], 16, 32, True)
        table = pe.tables[0 if shared else block]
        assert torch.equal(bias, table[index].permute(2, 0, 1))
    assert pe.bucket_index(n, torch.device("cpu")) is pe.bucket_index(n, torch.device("cpu"))  # cached
    assert pe.no_weight_decay() == {"tables"}
