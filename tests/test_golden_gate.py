"""Golden Gate RoPE (vitpos/encodings/golden_gate.py) against its reference,
lucidrains/vit-pytorch ``vit_pytorch/vit_nd_rotary.py`` ``GoldenGateRoPENd`` (commit 39fd9ac8),
and its properties.

The reference is written out here (:func:`released_freqs`, :func:`released_rotate`), so the
comparison runs without the package; where vit-pytorch is installed (a dev dependency) the written
reference is compared with it too, and that test fails, rather than skips, when it is missing.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import require_reference

from vitpos.encodings import create_encoding
from vitpos.encodings.golden_gate import golden_directions, golden_ratio


def released_freqs(dim_pos: int, heads: int, dim_head: int, min_freq=1.0, max_freq=10000.0, p_zero=0.0):
    """``GoldenGateRoPENd(dim_pos, heads, dim_head, rope_min_freq, rope_max_freq, rope_p_zero_freqs).freqs``
    (H, Dh/2, dim_pos), after ``_phi``, ``make_directions`` and ``__init__`` of vit_pytorch/vit_nd_rotary.py
    @ 39fd9ac8: phi_d by ten steps x <- (1 + x)^(1/(d+1)) from 2; point i (1-based) of heads * Dh/2 is
    frac(i * phi_d^-k), k = 1..d, through erfinv(2z - 1), normalized; omega: round(p * Dh/2) zeros, then
    min * (max / min)^linspace(0, 1); directions taken head-major."""
    x = 2.0
    for _ in range(10):
        x = (1 + x) ** (1.0 / (dim_pos + 1.0))
    n_freqs = dim_head // 2
    alpha = (1.0 / x) ** torch.arange(1, dim_pos + 1, dtype=torch.float64)
    i = torch.arange(1, heads * n_freqs + 1, dtype=torch.float64)[:, None]
    directions = F.normalize(torch.erfinv(2.0 * torch.fmod(i * alpha, 1.0) - 1.0), dim=-1).float()
    zeros = round(p_zero * n_freqs)
    omega = torch.cat([torch.zeros(zeros), min_freq * (max_freq / min_freq) ** torch.linspace(0, 1, n_freqs - zeros)])
    return directions.reshape(heads, n_freqs, dim_pos) * omega[:, None]


def released_rotate(x: torch.Tensor, pos: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """``GoldenGateRoPENd.forward``: x (B, H, N, Dh), pos (B, N, dim_pos); theta = sum_p freqs * pos, and
    the halves (x, y) = x.chunk(2) turn as (x cos - y sin, x sin + y cos)."""
    a, b = x.float().chunk(2, dim=-1)  # (B, H, N, Dh/2) each
    theta = (freqs[None, :, None] * pos.float()[:, None, :, None]).sum(-1)  # (B, H, N, Dh/2)
    return torch.cat([a * theta.cos() - b * theta.sin(), a * theta.sin() + b * theta.cos()], -1).type_as(x)


def grid_positions(h: int, w: int, batch: int = 2) -> torch.Tensor:
    """(B, h*w, 2) integer (row, column) coordinates, row-major: the reference's ``pos``."""
    ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    return torch.stack([ys, xs], -1).reshape(1, h * w, 2).float().expand(batch, -1, -1)


@pytest.mark.parametrize(
    ("heads", "dh", "grid"), [(3, 32, (5, 7)), (4, 64, (8, 8)), (2, 64, (12, 12)), (6, 16, (7, 10))]
)
@pytest.mark.parametrize("options", [{}, {"zero_fraction": 0.25, "min_freq": 0.5, "max_freq": 100.0}])
def test_it_equals_the_released_formula(heads, dh, grid, options):
    ref_options = {"min_freq": options.get("min_freq", 1.0), "max_freq": options.get("max_freq", 10000.0)}
    freqs = released_freqs(2, heads, dh, p_zero=options.get("zero_fraction", 0.0), **ref_options)
    pe = create_encoding("rope_2d_golden", dim=heads * dh, num_heads=heads, grid=grid, **options)
    assert torch.equal(pe.freqs, freqs)
    q, k = torch.randn(2, heads, math.prod(grid), dh), torch.randn(2, heads, math.prod(grid), dh)
    rq, rk = pe.rotate_qk(q, k, grid, 0)
    pos = grid_positions(*grid)
    torch.testing.assert_close(rq, released_rotate(q, pos, freqs), atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(rk, released_rotate(k, pos, freqs), atol=2e-5, rtol=1e-5)


def test_the_written_reference_is_the_installed_package():
    """The written reference against vit-pytorch's own module, where the dev dependency is installed; a
    missing package is a failure here (``pip install -e '.[dev]'``), never a skip."""
    reference = require_reference("vit_pytorch.vit_nd_rotary")
    heads, dh, (h, w) = 3, 32, (5, 7)
    for options in ({}, {"rope_min_freq": 0.5, "rope_max_freq": 100.0, "rope_p_zero_freqs": 0.25}):
        ref = reference.GoldenGateRoPENd(dim_pos=2, heads=heads, dim_head=dh, **options)
        mine = released_freqs(
            2,
            heads,
            dh,
            options.get("rope_min_freq", 1.0),
            options.get("rope_max_freq", 1e4),
            options.get("rope_p_zero_freqs", 0.0),
        )
        assert torch.equal(ref.freqs, mine)
        q = torch.randn(2, heads, h * w, dh)
        torch.testing.assert_close(released_rotate(q, grid_positions(h, w), mine), ref(q, grid_positions(h, w)))


def test_the_fixed_point_steps_give_phi_to_the_measured_accuracy():
    """Ten fixed-point steps, as the reference: phi_1 (the golden ratio) to 2.9e-6, phi_2 (x^3 = x + 1,
    which sets the 2D directions) to 3.7e-8."""
    assert golden_ratio(1) == pytest.approx((1 + math.sqrt(5)) / 2, abs=3e-6)
    plastic = 1.324717957244746  # the real root of x^3 = x + 1
    assert abs(golden_ratio(2) - plastic) == pytest.approx(3.7e-8, abs=0.1e-8)


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
