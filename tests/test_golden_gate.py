"""Golden Gate RoPE (vitpos/encodings/golden_gate.py) against its reference,
lucidrains/vit-pytorch ``vit_pytorch/vit_nd_rotary.py`` ``GoldenGateRoPENd``, and its properties."""

from __future__ import annotations

import math

import pytest
import torch

from vitpos.encodings import create_encoding
from vitpos.encodings.golden_gate import golden_directions, golden_ratio


def test_it_equals_the_reference_rotation():
    reference = pytest.importorskip("vit_pytorch.vit_nd_rotary", reason="vit-pytorch is a dev dependency")
    heads, dh, (h, w) = 3, 32, (5, 7)
    pe = create_encoding("rope_2d_golden", dim=heads * dh, num_heads=heads, grid=(h, w))
    ref = reference.GoldenGateRoPENd(dim_pos=2, heads=heads, dim_head=dh)
    assert torch.equal(pe.freqs, ref.freqs)
    ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    pos = torch.stack([ys, xs], -1).reshape(1, h * w, 2).float().expand(2, -1, -1)  # (B, N, 2): row, column
    q, k = torch.randn(2, heads, h * w, dh), torch.randn(2, heads, h * w, dh)
    rq, rk = pe.rotate_qk(q, k, (h, w), 0)
    torch.testing.assert_close(rq, ref(q, pos), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rk, ref(k, pos), atol=1e-5, rtol=1e-5)


def test_logits_depend_only_on_the_offset_between_patches():
    pe = create_encoding("rope_2d_golden", dim=32, num_heads=2, grid=(6, 6), max_freq=10.0)
    q, k = torch.randn(1, 2, 1, 16).expand(1, 2, 36, 16), torch.randn(1, 2, 1, 16).expand(1, 2, 36, 16)
    rq, rk = pe.rotate_qk(q.contiguous(), k.contiguous(), (6, 6), 0)
    logits = rq @ rk.transpose(-1, -2)  # (1, H, N, N)
    index = lambda y, x: 6 * y + x  # noqa: E731
    for (y, x), (dy, dx) in [((0, 0), (2, 3)), ((1, 2), (-1, 1)), ((3, 1), (0, -1))]:
        a = logits[0, :, index(y, x), index(y + dy, x + dx)]
        b = logits[0, :, index(y + 2, x + 1), index(y + 2 + dy, x + 1 + dx)]
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_the_directions_are_unit_and_spread_over_the_circle():
    assert golden_ratio(1) == pytest.approx((1 + math.sqrt(5)) / 2, abs=1e-3)
    u = golden_directions(48, 2)
    torch.testing.assert_close(u.norm(dim=-1), torch.ones(48))
    angles = torch.sort(torch.atan2(u[:, 1], u[:, 0])).values
    gaps = torch.diff(torch.cat([angles, angles[:1] + 2 * math.pi]))
    assert gaps.max() < math.radians(30)  # no orientation left out


def test_zero_frequencies_leave_their_pairs_unrotated():
    pe = create_encoding("rope_2d_golden", dim=32, num_heads=2, grid=(4, 4), zero_fraction=0.25)
    assert (pe.freqs[:, :2] == 0).all() and (pe.freqs[:, 2:] != 0).any(dim=-1).all()  # round(0.25 * 8) = 2 pairs
    q = torch.randn(1, 2, 16, 16)
    rq, _ = pe.rotate_qk(q, q, (4, 4), 0)
    torch.testing.assert_close(rq[..., [0, 1, 8, 9]], q[..., [0, 1, 8, 9]])  # half layout: pairs (i, i + 8)
