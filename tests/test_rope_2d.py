"""2D RoPE properties: norms kept, logits depend on the 2D offset only,
(0, 0) is the identity, class tokens are never rotated, float32 angles under bf16."""

import itertools

import pytest
import torch
from conftest import make_encoding

from bench.references import rotate_half_reference
from vitpos.encodings import functional as fn

ROPE_2D = ["rope_2d", "rope_2d_mixed"]
GRID = (5, 6)


def rotated(name, q, k, grid=GRID, prefix=0, **kw):
    pe = make_encoding(name, grid=grid, dim=32, heads=2, prefix=prefix, **kw)
    return pe.rotate_qk(q, k, grid, block=1)


@pytest.mark.parametrize("name", ROPE_2D)
def test_rotation_preserves_norms(name):
    q, k = torch.randn(2, 2, 30, 16), torch.randn(2, 2, 30, 16)
    rq, rk = rotated(name, q, k)
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1))
    torch.testing.assert_close(rk.norm(dim=-1), k.norm(dim=-1))
    assert not torch.allclose(rq, q)


@pytest.mark.parametrize("name", ROPE_2D)
def test_logit_depends_only_on_the_2d_offset(name):
    # the same q and k content at every position: any change of logit comes from position
    q = torch.randn(1, 2, 1, 16).expand(1, 2, 30, 16)
    k = torch.randn(1, 2, 1, 16).expand(1, 2, 30, 16)
    rq, rk = rotated(name, q, k)
    logits = rq @ rk.transpose(-1, -2)  # (1, H, N, N)
    coords = [(y, x) for y in range(GRID[0]) for x in range(GRID[1])]
    by_offset = {}
    for i, j in itertools.product(range(30), repeat=2):
        off = (coords[i][0] - coords[j][0], coords[i][1] - coords[j][1])
        by_offset.setdefault(off, []).append(logits[0, :, i, j])
    spread = max((torch.stack(v) - v[0]).abs().max() for v in by_offset.values())
    assert spread < 1e-4
    values = torch.stack([v[0] for v in by_offset.values()])
    assert values.std(0).min() > 1e-2  # and it does depend on the offset


@pytest.mark.parametrize("name", ROPE_2D)
def test_position_zero_is_the_identity_and_class_tokens_are_not_rotated(name):
    q, k = torch.randn(1, 2, 31, 16), torch.randn(1, 2, 31, 16)
    rq, rk = rotated(name, q, k, prefix=1)
    assert torch.equal(rq[:, :, 0], q[:, :, 0]) and torch.equal(rk[:, :, 0], k[:, :, 0])  # class token
    torch.testing.assert_close(rq[:, :, 1], q[:, :, 1])  # patch (0, 0)


@pytest.mark.parametrize("name", ROPE_2D)
def test_angles_are_float32_under_bf16_autocast(name):
    pe = make_encoding(name, grid=GRID, dim=32, heads=2)
    q, k = torch.randn(1, 2, 30, 16), torch.randn(1, 2, 30, 16)
    ref_q, _ = pe.rotate_qk(q, k, GRID, 0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        rot = pe.rotation(GRID, 0, q.device)
        bq, _ = pe.rotate_qk(q.bfloat16(), k.bfloat16(), GRID, 0)
    assert rot.dtype == torch.complex64
    assert bq.dtype == torch.bfloat16
    torch.testing.assert_close(bq.float(), ref_q, atol=5e-2, rtol=2e-2)


def test_axial_split_first_half_turns_with_x_second_with_y():
    pe = make_encoding("rope_2d", grid=(3, 3), dim=32, heads=2)
    angles = pe.rotation((3, 3), 0, torch.device("cpu")).angle()  # (9, 8) pairs
    # token (0, 1) moves in x only: only the first 4 pairs turn; (1, 0) only the last 4
    assert angles[1, :4].abs().min() > 0 and torch.allclose(angles[1, 4:], torch.zeros(4))
    assert angles[3, 4:].abs().min() > 0 and torch.allclose(angles[3, :4], torch.zeros(4))
    torch.testing.assert_close(angles[1, :4], fn.rope_inv_freq(4, 100.0))


def test_rope_head_dim_must_be_a_multiple_of_four():
    with pytest.raises(ValueError, match="multiple of 4"):
        make_encoding("rope_2d", dim=12, heads=2)  # head dim 6


def test_mixed_frequencies_start_at_base_10_magnitudes_in_perpendicular_pairs():
    pe = make_encoding("rope_2d_mixed", grid=GRID, dim=32, heads=2)
    f = pe.freqs.detach()  # (depth, H, Dh/2, 2)
    mags = f.norm(dim=-1)
    expected = fn.rope_inv_freq(4, 10.0).repeat(2)
    torch.testing.assert_close(mags, expected.expand_as(mags))
    dots = (f[..., :4, :] * f[..., 4:, :]).sum(-1)
    torch.testing.assert_close(dots, torch.zeros_like(dots), atol=1e-6, rtol=0)
    assert "freqs" in pe.no_weight_decay()


def test_complex_rotation_equals_the_rotate_half_reference():
    x = torch.randn(2, 3, 10, 16)
    angles = torch.randn(10, 8)
    ours = fn.apply_rotary(x, torch.polar(torch.ones_like(angles), angles), layout="half")
    ref = rotate_half_reference(x, angles.cos(), angles.sin())
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)
