"""Spiral RoPE (vitpos/encodings/spiral_rope.py): the paper's formula on any grid, and the released
code's angle map, huajianduzhuo-code/Spiral_RoPE ``RoPE_DeiT/rope.py`` (commit 4abece3b), rebuilt
here from its ``grid_sample`` construction (:func:`released_angles`).

Measured against it on 14 x 14 patches, head dim 64, K = 4: the angle between any two patches
agrees to 1.9e-6 rad where the released code's turned map stays on the grid (the disc inside the
square; 5.7e-6 rad after interpolating a 14 x 14 training grid to 20 x 20, as that code does), and
differs by up to 2.55 rad in the corners, where its border padding clamps the map (K = 8: 1.89 rad).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from vitpos.encodings import OptionError, create_encoding

CPU = torch.device("cpu")


def turned_map(block: torch.Tensor, alpha: float) -> torch.Tensor:
    """The released ``rotate_freqs``: an (n, n, ...) angle map turned as an image by ``alpha`` about
    its centre, bilinear, border padding, corners aligned."""
    n = block.shape[0]
    image = block.reshape(n, n, -1).permute(2, 0, 1)[None]  # (1, C, n, n)
    c, s = math.cos(alpha), math.sin(alpha)
    theta = torch.tensor([[c, -s, 0.0], [s, c, 0.0]])[None]  # (1, 2, 3)
    grid = F.affine_grid(theta, list(image.shape), align_corners=True)
    out = F.grid_sample(image, grid, mode="bilinear", padding_mode="border", align_corners=True)
    return out[0].permute(1, 2, 0).reshape(block.shape)


def released_angles(head_dim: int, n: int, directions: int, train: int, max_freq=1.5, base=10000.0):
    """(n*n, Dh/2) angles of the released ``VisionRotaryEmbedding(head_dim // 2, train, rotate=K/2,
    max_freq_lang=max_freq, min_freq_lang=0, same_theta=False)`` on an n x n grid, one per pair."""
    rotate, dim = directions // 2, head_dim // 2
    quarter = dim // 2
    min_freq = max_freq / base ** ((dim - 2) / dim)
    freqs = min_freq * (max_freq / min_freq) ** (torch.arange(quarter - 1, -1, -1).float() / (quarter - 1))
    t = torch.arange(n).float() / n * train  # its positions: always interpolated to the training grid
    axis = (t[:, None] * freqs).repeat_interleave(2, -1)  # (n, Dh/2): channels (2i, 2i+1) share a pair
    angles = torch.cat([axis[:, None, :].expand(n, n, -1), axis[None, :, :].expand(n, n, -1)], -1)  # rows, columns
    angles = angles.reshape(n, n, -1, 4 * rotate).clone()  # (n, n, Dh / 4K, 4K)
    for i in range(1, rotate):  # block i of every 4K channels turns by i * 180 / K degrees
        angles[..., 4 * i : 4 * i + 4] = turned_map(angles[..., 4 * i : 4 * i + 4], i * math.pi / directions)
    return angles.reshape(n * n, -1)[:, ::2]  # (N, Dh/2)


def angles_of(pe, grid) -> torch.Tensor:
    """(N, Dh/2) angles of the encoding's pairs on ``grid`` (its own positions and frequencies)."""
    xs, ys = pe.positions(grid, CPU)
    return ys[:, None] * pe.freqs[:, 0] + xs[:, None] * pe.freqs[:, 1]


def pairwise_gap(a: torch.Tensor, b: torch.Tensor, keep: torch.Tensor) -> float:
    """The largest difference of the angle between two patches (what attention sees) over the
    patches ``keep``: a constant per pair (the released map turns about the grid's centre) cancels."""
    a, b = a[keep], b[keep]
    return ((a[:, None] - a[None, :]) - (b[:, None] - b[None, :])).abs().max().item()


def in_disc(n: int) -> torch.Tensor:
    """(n*n,) the patches within (n - 1)/2 of the centre: a turned map samples them on the grid."""
    ys, xs = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    c = (n - 1) / 2
    return (((ys - c) ** 2 + (xs - c) ** 2).sqrt() <= c).reshape(-1)


@pytest.mark.parametrize(
    ("directions", "train", "n", "exact", "corners"),
    [(4, 14, 14, 1.9e-6, 2.55), (4, 14, 20, 5.7e-6, 2.61), (8, 14, 14, 1.9e-6, 1.89)],
)
def test_it_equals_the_released_code_where_its_turned_map_stays_on_the_grid(directions, train, n, exact, corners):
    strategy = {} if n == train else {"strategy": "interpolate", "align": "ratio"}  # the released positions
    pe = create_encoding("rope_2d_spiral", dim=64, num_heads=1, grid=(train, train), directions=directions, **strategy)
    ours, theirs = angles_of(pe, (n, n)), released_angles(64, n, directions, train)
    assert pairwise_gap(ours, theirs, in_disc(n)) <= 1.5 * exact
    gap = pairwise_gap(ours, theirs, torch.ones(n * n, dtype=torch.bool))  # the clamped corners: exact here only
    assert gap == pytest.approx(corners, abs=0.01)
    rot = pe.rotation((n, n), 0, CPU)
    torch.testing.assert_close(rot, torch.polar(torch.ones_like(ours), ours))


def test_any_grid_follows_the_papers_formula():
    """angle = omega (x cos phi + y sin phi), phi = k pi / K up to the sign of the angle, on a 3 x 7 grid."""
    (h, w), dh, k = (3, 7), 32, 4
    pe = create_encoding("rope_2d_spiral", dim=2 * dh, num_heads=2, grid=(h, w), directions=k, max_freq=1.0)
    j = torch.arange(dh // 4).double()
    omega = 10000.0 ** (-4 * j / dh)  # max_freq * base^(-4j/Dh)
    turn = (j // 2) % (k // 2) * math.pi / k
    phi, omega = torch.cat([math.pi / 2 - turn, -turn]), omega.repeat(2)  # (Dh/2,): row family, column family
    ys, xs = torch.meshgrid(torch.arange(h).double(), torch.arange(w).double(), indexing="ij")
    x, y = xs.reshape(-1, 1), ys.reshape(-1, 1)
    want = omega * (x * torch.cos(phi) + y * torch.sin(phi))  # (N, Dh/2)
    torch.testing.assert_close(pe.rotation((h, w), 0, CPU), torch.polar(torch.ones_like(want), want).cfloat())
    lines = sorted({round(float(p % math.pi) / (math.pi / k)) % k for p in phi})  # directions modulo a half turn
    assert lines == list(range(k))
    assert all((phi % math.pi == p % math.pi).sum() == dh // (2 * k) for p in phi)  # Dh/(2K) pairs each


@pytest.mark.parametrize("directions", [2, 4])
def test_direction_zero_turns_as_axial_x_and_a_quarter_turn_as_y(directions):
    """The pairs along phi = 0 are axial RoPE's column pairs, those along pi/2 its row pairs (rope_2d
    with the same spectrum: the first half of its pairs is x, here the first half starts from y)."""
    grid, dh = (3, 5), 32
    spiral = create_encoding("rope_2d_spiral", dim=dh, num_heads=1, grid=grid, directions=directions, max_freq=1.0)
    axial = create_encoding("rope_2d", dim=dh, num_heads=1, grid=grid, base=10000.0)
    rs, ra = spiral.rotation(grid, 0, CPU), axial.rotation(grid, 0, CPU)  # (N, Dh/2)
    quarter = dh // 4
    on_axis = torch.arange(quarter) // 2 % (directions // 2) == 0  # group 0 of each half
    torch.testing.assert_close(rs[:, quarter:][:, on_axis], ra[:, :quarter][:, on_axis])  # x
    torch.testing.assert_close(rs[:, :quarter][:, on_axis], ra[:, quarter:][:, on_axis])  # y
    assert on_axis.all() == (directions == 2)  # K = 2 is axial RoPE


def test_logits_depend_only_on_the_offset_between_patches():
    (h, w) = (5, 7)
    pe = create_encoding("rope_2d_spiral", dim=64, num_heads=2, grid=(h, w), directions=8)
    q, k = torch.randn(1, 2, 1, 32).expand(1, 2, h * w, 32), torch.randn(1, 2, 1, 32).expand(1, 2, h * w, 32)
    rq, rk = pe.rotate_qk(q.contiguous(), k.contiguous(), (h, w), 0)
    logits = rq @ rk.transpose(-1, -2)  # (1, H, N, N)
    index = lambda y, x: w * y + x  # noqa: E731
    for (y, x), (dy, dx) in [((0, 0), (2, 3)), ((1, 2), (-1, 1)), ((2, 0), (1, 5))]:
        a = logits[0, :, index(y, x), index(y + dy, x + dx)]
        b = logits[0, :, index(y + 1, x + 1), index(y + 1 + dy, x + 1 + dx)]  # the same offset, one patch down-right
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    assert logits[0, 0, index(0, 0)].std() > 1e-2  # the logit does depend on the offset


def test_the_rotation_keeps_norms_and_the_class_token():
    pe = create_encoding("rope_2d_spiral", dim=32, num_heads=2, grid=(4, 6), num_prefix_tokens=1)
    q = torch.randn(2, 2, 25, 16)
    rq, _ = pe.rotate_qk(q, q.clone(), (4, 6), 0)
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1))
    assert torch.equal(rq[:, :, 0], q[:, :, 0])
    assert pe.rotation((4, 6), 0, CPU) is pe.rotation((4, 6), 1, CPU)  # one fixed table, cached


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"directions": 3}, "even integer >= 2"),
        ({"directions": 0}, "even integer >= 2"),
        ({"directions": True}, "even integer >= 2"),
        ({"directions": 8}, "multiple of 32"),  # head dim 16
        ({"max_freq": 0.0}, "encoding.max_freq"),
        ({"min_freq": -1.0}, "encoding.min_freq"),
    ],
)
def test_bad_options_name_the_option_and_the_fix(options, match):
    with pytest.raises(OptionError, match=match) as err:
        create_encoding("rope_2d_spiral", dim=32, num_heads=2, grid=(4, 4), **options)
    assert err.value.option == f"encoding.{next(iter(options))}"
