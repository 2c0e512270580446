"""Spiral RoPE (vitpos/encodings/spiral_rope.py): the paper's formula on any grid, and the released
code, huajianduzhuo-code/Spiral_RoPE ``RoPE_DeiT/rope.py`` and ``RoPE_DeiT/models_v2.py`` (commit
4abece3b), rebuilt here: its ``grid_sample`` angle map (:func:`released_angles`), its attention with
an unrotated class token (:func:`released_logits`) and its ``truncate_percentage`` rule.

Measured against it on 14 x 14 patches, head dim 64, K = 4: the angle of a patch agrees to 1.9e-6
rad where the released code's turned map stays on the grid (the disc inside the square; 3.8e-6 rad
after interpolating a 14 x 14 training grid to 20 x 20, as that code does), the angle between two
patches to 1.9e-6 rad (5.7e-6 at 20 x 20), and they differ by up to 2.55 rad between patches in the
corners, where its border padding clamps the map (K = 8: 1.89 rad).
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


def released_angles(head_dim: int, n: int, directions: int, train: int, max_freq=1.5, base=10000.0, truncate=0.0):
    """(n*n, Dh/2) angles of the released ``VisionRotaryEmbedding(head_dim // 2, train, rotate=K/2,
    truncate_percentage=truncate, max_freq_lang=max_freq, min_freq_lang=0, same_theta=False)`` on an
    n x n grid, one per pair."""
    rotate, dim = directions // 2, head_dim // 2
    quarter = dim // 2
    min_freq = max_freq / base ** ((dim - 2) / dim)
    freqs = min_freq * (max_freq / min_freq) ** (torch.arange(quarter - 1, -1, -1).float() / (quarter - 1))
    freqs = released_truncation(freqs, truncate)
    t = torch.arange(n).float() / n * train  # its positions: always interpolated to the training grid
    axis = (t[:, None] * freqs).repeat_interleave(2, -1)  # (n, Dh/2): channels (2i, 2i+1) share a pair
    angles = torch.cat([axis[:, None, :].expand(n, n, -1), axis[None, :, :].expand(n, n, -1)], -1)  # rows, columns
    angles = angles.reshape(n, n, -1, 4 * rotate).clone()  # (n, n, Dh / 4K, 4K)
    for i in range(1, rotate):  # block i of every 4K channels turns by i * 180 / K degrees
        angles[..., 4 * i : 4 * i + 4] = turned_map(angles[..., 4 * i : 4 * i + 4], i * math.pi / directions)
    return angles.reshape(n * n, -1)[:, ::2]  # (N, Dh/2)


def released_truncation(freqs: torch.Tensor, truncate_percentage: float) -> torch.Tensor:
    """The released ``VisionRotaryEmbedding.__init__``'s truncation of its descending frequencies:
    ``num_to_truncate = int(len * t)``, then ``freqs[-num_to_truncate:] = 0``."""
    freqs = freqs.clone()
    if truncate_percentage > 0:
        freqs[-int(freqs.shape[0] * truncate_percentage) :] = 0
    return freqs


def released_rope(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """The released ``forward``: x (B, N, H, Dh) * cos + rotate_half(x) * sin, the angles (N, Dh/2)
    repeated over the channels (2i, 2i+1) of each pair."""
    full = angles.repeat_interleave(2, -1)[:, None, :]  # (N, 1, Dh)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    half = torch.stack([-x2, x1], -1).flatten(-2)  # rotate_half
    return x * full.cos() + half * full.sin()


def released_logits(q: torch.Tensor, k: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """The released ``models_v2.Attention``: q, k (B, 1 + N, H, Dh), the class token first and not
    rotated (``torch.cat((q[:, :1], self.rope(q[:, 1:])), dim=1)``); the logits q . k (B, H, 1+N, 1+N)."""
    q = torch.cat([q[:, :1], released_rope(q[:, 1:], angles)], 1)
    k = torch.cat([k[:, :1], released_rope(k[:, 1:], angles)], 1)
    return q.transpose(1, 2) @ k.transpose(1, 2).transpose(-1, -2)


def angles_of(pe, grid) -> torch.Tensor:
    """(N, Dh/2) angles of the encoding's pairs on ``grid`` (its own positions and frequencies): the
    position turned about the grid's centre c, omega . (p - c) + omega_0 . c."""
    xs, ys = pe.positions(grid, CPU)
    cy, cx = (ys[0] + ys[-1]) / 2, (xs[0] + xs[-1]) / 2
    turned = (ys[:, None] - cy) * pe.freqs[:, 0] + (xs[:, None] - cx) * pe.freqs[:, 1]
    return turned + cy * pe.axial[:, 0] + cx * pe.axial[:, 1]


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
    assert (ours - theirs)[in_disc(n)].abs().max() <= 1.5 * exact  # each patch's own angle too: the same origin
    gap = pairwise_gap(ours, theirs, torch.ones(n * n, dtype=torch.bool))  # the clamped corners: exact here only
    assert gap == pytest.approx(corners, abs=0.01)
    rot = pe.rotation((n, n), 0, CPU)
    torch.testing.assert_close(rot, torch.polar(torch.ones_like(ours), ours))


@pytest.mark.parametrize(("train", "n"), [(14, 14), (14, 20)])
def test_with_a_class_token_the_logits_equal_the_released_models(train, n):
    """``model.pool=cls``: the released model leaves its class token unrotated and turns its angle map
    about the grid's centre, so the class token meets each patch at that phase. Class-to-patch,
    patch-to-class and patch-to-patch logits equal the released model's where its map stays on the
    grid; patch-to-patch ones also equal those of an origin at the top-left patch (offsets only),
    class-to-patch ones do not (up to 3.1 rad of phase a pair)."""
    strategy = {} if n == train else {"strategy": "interpolate", "align": "ratio"}  # the released positions
    pe = create_encoding("rope_2d_spiral", dim=128, num_heads=2, grid=(train, train), num_prefix_tokens=1, **strategy)
    q, k = torch.randn(2, 2, 1 + n * n, 64), torch.randn(2, 2, 1 + n * n, 64)  # (B, H, 1 + N, Dh)
    rq, rk = pe.rotate_qk(q, k, (n, n), 0)
    ours = rq @ rk.transpose(-1, -2)  # (B, H, 1 + N, 1 + N)
    theirs = released_logits(q.transpose(1, 2), k.transpose(1, 2), released_angles(64, n, 4, train))
    keep = torch.cat([torch.tensor([True]), in_disc(n)])  # the class token and the patches on the grid
    ours, theirs = ours[..., keep, :][..., keep], theirs[..., keep, :][..., keep]
    torch.testing.assert_close(ours, theirs, atol=2e-4, rtol=0)
    xs, ys = pe.positions((n, n), CPU)
    corner = ys[:, None] * pe.freqs[:, 0] + xs[:, None] * pe.freqs[:, 1]  # (N, Dh/2): the origin at patch (0, 0)
    before = released_logits(q.transpose(1, 2), k.transpose(1, 2), corner)[..., keep, :][..., keep]
    torch.testing.assert_close(ours[..., 1:, 1:], before[..., 1:, 1:], atol=2e-4, rtol=0)  # patch to patch
    assert (ours[..., 0, 1:] - before[..., 0, 1:]).abs().max() > 1.0  # class to patch: another frame


@pytest.mark.parametrize("t", [0.1, 0.25, 0.3, 0.5, 0.9])
def test_truncate_percentage_is_the_released_rule(t):
    """``truncate_percentage`` t leaves int(n t) of the n = Dh/4 frequencies of each half still, the
    lowest, as the released code zeroes ``freqs[-int(n t):]``; the angles equal the released code's
    truncated map. ``rotate_fraction`` 1 - t leaves ceil(t n) still instead: one pair more per half
    where n t is fractional (t = 0.1 at head dim 64: 1 against 2)."""
    pe = create_encoding("rope_2d_spiral", dim=64, num_heads=1, grid=(14, 14), truncate_percentage=t)
    theirs = released_angles(64, 14, 4, 14, truncate=t)  # (N, Dh/2)
    zeroed = released_truncation(torch.ones(16), t) == 0  # (Dh/4,) the released frequencies set to 0
    rot = pe.rotation((14, 14), 0, CPU).reshape(196, 32)  # (N, Dh/2)
    still = (rot == 1).all(dim=0)
    assert torch.equal(still, zeroed.repeat(2)) and still.sum() == 2 * int(16 * t)
    disc = in_disc(14)
    torch.testing.assert_close(rot[disc], torch.polar(torch.ones_like(theirs), theirs)[disc], atol=1e-5, rtol=0)
    other = create_encoding("rope_2d_spiral", dim=64, num_heads=1, grid=(14, 14), rotate_fraction=1 - t)
    other_still = (other.rotation((14, 14), 0, CPU).reshape(196, 32) == 1).all(dim=0)
    assert other_still.sum() == 2 * (16 - math.floor((1 - t) * 16))


def test_any_grid_follows_the_papers_formula():
    """angle = omega ((x - cx) cos phi + (y - cy) sin phi) + the centre's angle before the turn, phi =
    k pi / K up to the sign of the angle, on a 3 x 7 grid: the paper's formula about the grid's centre
    (cy, cx) = (1, 3), which differs from it about patch (0, 0) by a constant a pair."""
    (h, w), dh, k = (3, 7), 32, 4
    pe = create_encoding("rope_2d_spiral", dim=2 * dh, num_heads=2, grid=(h, w), directions=k, max_freq=1.0)
    j = torch.arange(dh // 4).double()
    omega = 10000.0 ** (-4 * j / dh)  # max_freq * base^(-4j/Dh)
    turn = (j // 2) % (k // 2) * math.pi / k
    phi, omega = torch.cat([math.pi / 2 - turn, -turn]), omega.repeat(2)  # (Dh/2,): row family, column family
    ys, xs = torch.meshgrid(torch.arange(h).double(), torch.arange(w).double(), indexing="ij")
    x, y = xs.reshape(-1, 1) - 3, ys.reshape(-1, 1) - 1  # about the centre
    phi0 = torch.cat([torch.full((dh // 4,), math.pi / 2), torch.zeros(dh // 4)]).double()  # before the turn
    centre = omega * (3 * torch.cos(phi0) + torch.sin(phi0))  # (Dh/2,)
    want = omega * (x * torch.cos(phi) + y * torch.sin(phi)) + centre  # (N, Dh/2)
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
        ({"truncate_percentage": 1.0}, "number in [0, 1)"),
        ({"truncate_percentage": "half"}, "number in [0, 1)"),
        ({"truncate_percentage": 0.1}, "int(0.1 * 4) = 0"),  # the released code would stop every pair
        ({"truncate_percentage": 0.5, "rotate_fraction": 0.5}, "set only one of them"),
    ],
)
def test_bad_options_name_the_option_and_the_fix(options, match):
    with pytest.raises(OptionError) as err:
        create_encoding("rope_2d_spiral", dim=32, num_heads=2, grid=(4, 4), **options)
    assert err.value.option == f"encoding.{next(iter(options))}" and match in err.value.line(), err.value.line()
