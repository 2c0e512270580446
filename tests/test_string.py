"""STRING (string_cayley, string_circulant): the paper's equations rebuilt densely with
torch.linalg.matrix_exp, P orthogonal, P = I is rope_2d, offsets only, class tokens, bf16, other grids."""

import itertools
import math

import pytest
import torch
from conftest import make_encoding

from vitpos.encodings import OptionError
from vitpos.encodings.string_rope import circulant_rotate, real_dft_basis

STRING = ["string_cayley", "string_circulant"]
DH, HEADS = 16, 2  # dim 32


def randomize(pe, std=0.3, seed=1):
    """Random S (Cayley) or random circulant rows: far from the identity and from the init."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in pe.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * std)
    return pe


def qk(n, prefix=0, seed=0, batch=2):
    g = torch.Generator().manual_seed(seed)
    shape = (batch, HEADS, prefix + n, DH)
    return torch.randn(shape, generator=g), torch.randn(shape, generator=g)


def xy(h, w, interp_from=None):
    """(N, 2) float64 (x = column, y = row) positions of a row-major grid; ``interp_from`` (ht, wt):
    position interpolation with corners aligned, x * (wt - 1) / (w - 1)."""
    ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float64), torch.arange(w, dtype=torch.float64), indexing="ij")
    if interp_from is not None:
        ht, wt = interp_from
        ys, xs = ys * (ht - 1) / max(h - 1, 1), xs * (wt - 1) / max(w - 1, 1)
    return torch.stack([xs.flatten(), ys.flatten()], -1)


# ---------------------------------------------------------------- the paper's matrices, densely
def skew_from_parameter(v, d):
    """S (d, d) float64 from its row-major strict upper triangle v."""
    s = torch.zeros(d, d, dtype=torch.float64)
    rows, cols = torch.triu_indices(d, d, 1)
    s[rows, cols] = v.double()
    return s - s.T


def cayley_dense(s):
    eye = torch.eye(len(s), dtype=torch.float64)
    return (eye - s) @ torch.linalg.inv(eye + s)  # the paper's order: (I - S)(I + S)^-1


def rope_2d_generators(d, base=100.0):
    """(2, d, d) float64 L_x, L_y of axial 2D RoPE: pair (2a, 2a+1) turns by f x (first d/4 pairs) or
    f y (the next d/4), f = base^(-4i/d); a rotation [[cos, -sin], [sin, cos]] = exp(f x [[0, -1], [1, 0]])."""
    gens = torch.zeros(2, d, d, dtype=torch.float64)
    for axis, i in itertools.product(range(2), range(d // 4)):
        a, f = 2 * (axis * d // 4 + i), base ** (-4 * i / d)
        gens[axis, a, a + 1], gens[axis, a + 1, a] = -f, f
    return gens


def circulant_dense(c):
    """C (d, d) float64 with first row c: C[i, j] = c[(j - i) mod d]."""
    d = len(c)
    return c.double()[(torch.arange(d)[None, :] - torch.arange(d)[:, None]) % d]


def string_apply(gens, positions, x, left=None):
    """exp(x L_x + y L_y) applied per token, optionally followed by ``left``: gens (2, d, d), positions
    (N, 2), x (B, N, d) -> (B, N, d) float64."""
    rot = torch.linalg.matrix_exp(torch.einsum("nk,kij->nij", positions, gens))  # (N, d, d)
    if left is not None:
        rot = left @ rot
    return torch.einsum("nij,bnj->bni", rot, x.double())


def cayley_reference(pe, block, q, positions):
    """q' = P exp(sum_k r_k P^T L_k P) q per head (= RoPE(r) P q): the STRING form P^T RoPE P, the leading P
    kept as the paper's Cayley-STRING does; class tokens (in front) unrotated, times the same P."""
    p, out = q.shape[2] - len(positions), q.double().clone()
    for h in range(HEADS):
        big_p = cayley_dense(skew_from_parameter(pe.skew[block, h].detach(), DH))
        gens = big_p.T @ rope_2d_generators(DH) @ big_p  # (2, d, d): skew-symmetric, commuting
        assert torch.allclose(gens[0] @ gens[1], gens[1] @ gens[0], atol=1e-12)
        out[:, h, p:] = string_apply(gens, positions, q[:, h, p:], left=big_p)
        out[:, h, :p] = q[:, h, :p].double() @ big_p.T
    return out


def circulant_reference(pe, block, q, positions):
    p, out = q.shape[2] - len(positions), q.double().clone()
    for h in range(HEADS):
        rows = pe.coeffs[block, h].detach()  # (2, d): x, y
        gens = torch.stack([circulant_dense(c) - circulant_dense(c).T for c in rows])  # L_k = C_k - C_k^T
        out[:, h, p:] = string_apply(gens, positions, q[:, h, p:])
    return out


REFERENCE = {"string_cayley": cayley_reference, "string_circulant": circulant_reference}


# ----------------------------------------------------------------------------------- reference tests
@pytest.mark.parametrize("name", STRING)
@pytest.mark.parametrize("grid", [(3, 5), (4, 4)])
@pytest.mark.parametrize("prefix", [0, 1])
@pytest.mark.parametrize("random", [False, True])
def test_equals_the_dense_matrix_exponential_of_the_paper(name, grid, prefix, random):
    pe = make_encoding(name, grid=grid, dim=HEADS * DH, heads=HEADS, depth=2, prefix=prefix)
    if random:
        randomize(pe)
    q, k = qk(math.prod(grid), prefix)
    for block in (0, 1):
        rq, rk = pe.rotate_qk(q, k, grid, block)
        for ours, x in ((rq, q), (rk, k)):
            expected = REFERENCE[name](pe, block, x, xy(*grid))
            torch.testing.assert_close(ours.double(), expected, atol=1e-4, rtol=1e-4)
            if name == "string_circulant" or not random:  # Cayley turns class tokens by P (I at init)
                assert torch.equal(ours[:, :, :prefix], x[:, :, :prefix])
            assert not torch.allclose(ours[:, :, prefix:], x[:, :, prefix:])


@pytest.mark.parametrize("name", STRING)
def test_extrapolate_and_interpolate_on_a_larger_grid_follow_the_paper(name):
    train, big = (3, 5), (5, 9)
    pe = randomize(make_encoding(name, grid=train, dim=HEADS * DH, heads=HEADS, depth=1, prefix=1))
    q, k = qk(math.prod(big), prefix=1)
    for strategy, positions in (("extrapolate", xy(*big)), ("interpolate", xy(*big, interp_from=train))):
        pe.strategy = strategy
        rq, _ = pe.rotate_qk(q, k, big, 0)
        torch.testing.assert_close(rq.double(), REFERENCE[name](pe, 0, q, positions), atol=1e-4, rtol=1e-4)
    q, k = qk(math.prod(train), prefix=1)
    pe.strategy = "extrapolate"
    at_train = pe.rotate_qk(q, k, train, 0)
    pe.strategy = "interpolate"
    assert all(torch.equal(a, b) for a, b in zip(at_train, pe.rotate_qk(q, k, train, 0)))  # same grid: same


# -------------------------------------------------------------------------------------------- Cayley
def test_cayley_basis_is_orthogonal_and_identity_at_init():
    pe = make_encoding("string_cayley", dim=HEADS * DH, heads=HEADS, depth=3)
    assert pe.skew.shape == (3, HEADS, DH * (DH - 1) // 2)  # exactly S's degrees of freedom
    eye = torch.eye(DH).expand(HEADS, DH, DH)
    for block in range(3):
        assert torch.equal(pe.basis(block), eye)
    for std in (0.1, 1.0, 10.0):
        randomize(pe, std=std)
        for block in range(3):
            s, big_p = pe.skew_matrix(block), pe.basis(block)
            assert torch.equal(s, -s.transpose(-1, -2))
            torch.testing.assert_close(s[0].double(), skew_from_parameter(pe.skew[block, 0].detach(), DH))
            torch.testing.assert_close(big_p.transpose(-1, -2) @ big_p, eye, atol=1e-5, rtol=0)
            torch.testing.assert_close(torch.linalg.det(big_p), torch.ones(HEADS), atol=1e-4, rtol=0)  # SO(d)
            torch.testing.assert_close(big_p[0].double(), cayley_dense(s[0].double()), atol=1e-5, rtol=0)
            assert (big_p - eye).abs().max() > 0.05


@pytest.mark.parametrize("prefix", [0, 1])
def test_cayley_at_init_is_rope_2d_exactly_for_every_strategy(prefix):
    train, other = (3, 5), (5, 4)
    pe = make_encoding("string_cayley", grid=train, dim=HEADS * DH, heads=HEADS, depth=2, prefix=prefix)
    rope = make_encoding("rope_2d", grid=train, dim=HEADS * DH, heads=HEADS, depth=2, prefix=prefix)
    assert pe.strategies == rope.strategies
    for strategy, grid in itertools.product(pe.strategies, (train, other)):
        pe.strategy = rope.strategy = strategy
        q, k = qk(math.prod(grid), prefix)
        for ours, theirs in zip(pe.rotate_qk(q, k, grid, 1), rope.rotate_qk(q, k, grid, 1)):
            assert torch.equal(ours, theirs), (strategy, grid)


def test_cayley_with_a_learned_basis_is_rope_2d_after_p_for_every_strategy():
    """P does not depend on position: every rope_2d strategy applies unchanged after it (P on every
    token, the class token's included)."""
    train, other = (3, 5), (6, 7)
    pe = randomize(make_encoding("string_cayley", grid=train, dim=HEADS * DH, heads=HEADS, depth=2, prefix=1))
    rope = make_encoding("rope_2d", grid=train, dim=HEADS * DH, heads=HEADS, depth=2, prefix=1)
    for strategy in pe.strategies:
        pe.strategy = rope.strategy = strategy
        q, k = qk(math.prod(other), prefix=1)
        big_p = pe.basis(1).detach()  # (H, d, d)
        pq, pk = q @ big_p.mT, k @ big_p.mT
        for ours, theirs in zip(pe.rotate_qk(q, k, other, 1), rope.rotate_qk(pq, pk, other, 1)):
            torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------------------------ circulant
def test_circulant_rope_init_has_rope_2d_spectrum_and_zero_init_is_the_identity():
    pe = make_encoding("string_circulant", dim=HEADS * DH, heads=HEADS, depth=2)
    assert pe.coeffs.shape == (2, HEADS, 2, DH)
    spectrum = [100.0 ** (-4 * i / DH) for i in range(DH // 4)]  # rope_2d: 4 per axis at Dh 16
    expected = {0: spectrum, 1: spectrum[:3]}  # 7 rotating planes: 4 turn with x, 3 with y
    for axis, freqs in expected.items():
        c = pe.coeffs[1, 0, axis].detach()
        eig = torch.linalg.eigvals(circulant_dense(c) - circulant_dense(c).T).imag.abs().sort().values
        want = torch.tensor(sorted([0.0] * (DH - 2 * len(freqs)) + freqs * 2), dtype=torch.float64)
        torch.testing.assert_close(eig, want, atol=1e-6, rtol=1e-5)
    zero = make_encoding("string_circulant", dim=HEADS * DH, heads=HEADS, init="zero", prefix=1)
    q, k = qk(16, prefix=1)
    for ours, x in zip(zero.rotate_qk(q, k, (4, 4), 0), (q, k)):
        torch.testing.assert_close(ours, x, atol=1e-6, rtol=0)  # no position information at all


def test_circulant_dense_dft_path_is_the_fft_path():
    basis = real_dft_basis(DH)
    torch.testing.assert_close(basis @ basis.T, torch.eye(DH), atol=1e-6, rtol=0)
    x = torch.randn(3, 7, DH, generator=torch.Generator().manual_seed(2))
    theta = torch.randn(3, 7, DH // 2 + 1, generator=torch.Generator().manual_seed(3))
    theta[..., 0] = theta[..., -1] = 0  # as every circulant_frequencies: DC and Nyquist never turn
    rot = torch.polar(torch.ones_like(theta), theta)
    torch.testing.assert_close(circulant_rotate(x, rot, basis), circulant_rotate(x, rot), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", STRING)
def test_compiled_rotation_equals_the_paper_too(name):
    """Under torch.compile the circulant takes its dense-DFT path (aot_eager: dynamo's trace, no codegen)."""
    grid = (3, 5)
    pe = randomize(make_encoding(name, grid=grid, dim=HEADS * DH, heads=HEADS, depth=1, prefix=1))
    q, k = qk(15, prefix=1)
    compiled = torch.compile(lambda q, k: pe.rotate_qk(q, k, grid, 0), backend="aot_eager", fullgraph=True)
    rq, _ = compiled(q, k)
    torch.testing.assert_close(rq.double(), REFERENCE[name](pe, 0, q, xy(*grid)), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    "options,option,match",
    [
        (dict(init="random"), "encoding.init", "valid: rope, zero"),
        (dict(base=0.0), "encoding.base", "100.0"),
        (dict(align="middle"), "encoding.align", "corners, ratio"),
        (dict(strategy="ntk"), "encoding.strategy", "extrapolate, interpolate"),
    ],
)
def test_circulant_bad_options_name_the_option(options, option, match):
    with pytest.raises(OptionError) as err:
        make_encoding("string_circulant", **options)
    assert err.value.option == option and match in err.value.line(), err.value.line()


@pytest.mark.parametrize("dim", [8, 14])  # head dims 4 and 7
def test_circulant_needs_an_even_head_dim_of_six(dim):
    with pytest.raises(ValueError, match="model.num_heads"):
        make_encoding("string_circulant", dim=dim, heads=2)


# ----------------------------------------------------------------------------------------- both
@pytest.mark.parametrize("name", STRING)
@pytest.mark.parametrize("prefix", [0, 1])
def test_logits_depend_only_on_the_2d_offset(name, prefix):
    grid = (4, 5)
    pe = randomize(make_encoding(name, grid=grid, dim=HEADS * DH, heads=HEADS, depth=2, prefix=prefix))
    n = math.prod(grid)
    q, k = qk(1, seed=3, batch=1)
    q, k = q.expand(1, HEADS, prefix + n, DH), k.expand(1, HEADS, prefix + n, DH)  # the same content everywhere
    rq, rk = pe.rotate_qk(q, k, grid, 1)
    logits = (rq @ rk.transpose(-1, -2))[0, :, prefix:, prefix:]  # (H, N, N)
    positions = xy(*grid).long().tolist()
    by_offset: dict[tuple, list] = {}
    for i, j in itertools.product(range(n), repeat=2):
        offset = (positions[j][0] - positions[i][0], positions[j][1] - positions[i][1])
        by_offset.setdefault(offset, []).append(logits[:, i, j])
    assert max((torch.stack(v) - v[0]).abs().max() for v in by_offset.values()) < 1e-4
    assert torch.stack([v[0] for v in by_offset.values()]).std(0).min() > 1e-2  # and it does depend on it


@pytest.mark.parametrize("name", STRING)
def test_bf16_autocast_stays_close_to_float32(name):
    grid = (4, 5)
    pe = randomize(make_encoding(name, grid=grid, dim=HEADS * DH, heads=HEADS, depth=2, prefix=1), std=0.1)
    q, k = qk(20, prefix=1)
    q, k = q.bfloat16(), k.bfloat16()
    ref_q, ref_k = pe.rotate_qk(q.float(), k.float(), grid, 0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bq, bk = pe.rotate_qk(q, k, grid, 0)
    for ours, ref in ((bq, ref_q), (bk, ref_k)):
        assert ours.dtype == torch.bfloat16
        assert (ours.float() - ref).norm() / ref.norm() < 1e-2  # one bf16 rounding of the result (~0.4%)
