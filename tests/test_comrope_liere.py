"""ComRoPE and LieRE: each against a re-implementation of its authors' code, what
ComRoPE's parameters reduce to, relative (ComRoPE) and not relative (LieRE)
logits, orthogonal rotations, other grids, bf16, the evaluation cache, options."""

import itertools

import pytest
import torch
from conftest import make_encoding, small_vit

from vitpos.encodings import OptionError
from vitpos.models.compile import CompiledForward

F64 = torch.float64


def randomize(pe, scale=0.3):
    """Every parameter random (LD's theta included), small enough for well-conditioned exponentials."""
    torch.manual_seed(1)
    with torch.no_grad():
        for p in pe.parameters():
            p.normal_(0, scale)
    return pe


def qk(pe, grid, batch=2):
    t = pe.num_prefix_tokens + grid[0] * grid[1]
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, batch, pe.ctx.num_heads, t, pe.ctx.head_dim, generator=g).unbind(0)  # (B, H, T, Dh) each


def rotate(pe, grid, block=0):
    q, k = qk(pe, grid)
    return q, k, *pe.rotate_qk(q, k, grid, block)


def logits_of_constant_tokens(pe, grid, block=0):
    """(H, N, N) logits when every token has the same q and the same k: a function of the positions only."""
    h, w = grid
    g = torch.Generator().manual_seed(2)
    q, k = (torch.randn(1, pe.ctx.num_heads, 1, pe.ctx.head_dim, generator=g).expand(-1, -1, h * w, -1) for _ in "qk")
    rq, rk = pe.rotate_qk(q, k, grid, block)
    return (rq @ rk.transpose(-1, -2))[0]


def spread_per_offset(logits, grid, stride=1):
    """Largest spread of the logits over token pairs with the same (dy, dx) (stride: the offset scaled by it)."""
    h, w = grid
    cells = list(itertools.product(range(h), range(w)))
    groups: dict[tuple, list] = {}
    for (i, a), (j, b) in itertools.product(enumerate(cells), repeat=2):
        groups.setdefault(((b[0] - a[0]) * stride, (b[1] - a[1]) * stride), []).append(logits[:, i, j])
    return {off: (torch.stack(v).amax(0) - torch.stack(v).amin(0)).max().item() for off, v in groups.items()}


# ----------------------------------------------------------------- the authors' code, rebuilt
def comrope_reference(pe, grid, block):
    """Longin-Yu/ComRoPE model.py (d6e0fbe): positions (i + 0.5) / n with the class token at 0.5,
    lnR = sum_a x_a A_a, one matrix_exp per token and block, R placed on the block diagonal by
    kron(I, ones(b, b)), q' = R q. Returns (H, T, Dh, Dh) float64. Theirs has one square side;
    here each axis has its own."""
    h, w = grid
    ys, xs = torch.meshgrid(torch.arange(h, dtype=F64), torch.arange(w, dtype=F64), indexing="ij")
    pos = (torch.stack([ys.flatten(), xs.flatten()], -1) + 0.5) / torch.tensor([h, w], dtype=F64)
    pos = torch.cat([torch.full((pe.num_prefix_tokens, 2), 0.5, dtype=F64), pos])  # prepend_cls
    s = pe.freqs[block].detach().double()
    s = s - s.transpose(-1, -2)  # (H, m, b, b)
    m, b = s.shape[1], s.shape[-1]
    if pe.variant == "ld":
        a = pe.multiplier[block].detach().double()[None, :, :, None, None] * s[:, None]  # (H, axes, m, b, b)
    else:
        mask = torch.zeros(2, m, dtype=F64)
        for axis in range(2):
            mask[axis, axis::2] = 1.0
        a = s[:, None] * mask[None, :, :, None, None]
    rot = torch.linalg.matrix_exp(torch.einsum("ta,hakij->thkij", pos, a))  # (T, H, m, b, b)
    selector = torch.kron(torch.eye(m), torch.ones(b, b)).bool()
    dense = torch.zeros(*rot.shape[:2], m * b, m * b, dtype=F64)
    dense[:, :, selector] = rot.reshape(*rot.shape[:2], -1)
    return dense.transpose(0, 1)  # (H, T, Dh, Dh)


def liere_reference(pe, grid, block):
    """StanfordMIMI/LieRE models/rope_vit.py (6a7823b): raw (axes, layers, heads * m, g, g) of
    which triu(raw, 1) - 0.5 = U is used, A = U - U^T; positions the cartesian product of
    linspace(0, n / n_train, n); the class token a zero generator; x' = R x per chunk of g."""
    depth, heads, _, m, _ = pe.generators.shape
    g = pe.block_size
    raw = torch.rand(2, depth, heads * m, g, g, dtype=F64) * 7  # the lower triangle is discarded
    rows, cols = torch.triu_indices(g, g, 1)
    raw[..., rows, cols] = pe.generators.detach().double().permute(2, 0, 1, 3, 4).reshape(2, depth, heads * m, -1)
    upper = torch.triu(raw, diagonal=1) - 0.5
    bases = upper - upper.transpose(-1, -2)  # (2, L, G, g, g)
    axes = [torch.linspace(0, n / nt, n, dtype=F64) for n, nt in zip(grid, pe.train_grid)]
    positions = torch.cartesian_prod(*axes)  # (N, 2)
    gen = (positions.reshape(-1, 2, 1, 1, 1, 1) * bases).sum(1)  # (N, L, G, g, g)
    gen = torch.cat([torch.zeros_like(gen[:1]).expand(pe.num_prefix_tokens, -1, -1, -1, -1), gen])
    rot = torch.linalg.matrix_exp(gen)[:, block].reshape(-1, heads, m, g, g).transpose(0, 1)  # (H, T, m, g, g)
    return rot


def apply_reference(x, rot):
    """x (B, H, T, Dh), rot (H, T, m, b, b) or dense (H, T, Dh, Dh): R x as column vectors."""
    b, h, t, dh = x.shape
    if rot.dim() == 4:
        blocks = x.double()[..., None]  # (B, H, T, Dh, 1)
    else:
        blocks = x.double().reshape(b, h, t, -1, rot.shape[-1], 1)  # (B, H, T, m, b, 1)
    return torch.matmul(rot, blocks).reshape(b, h, t, dh)


@pytest.mark.parametrize("variant", ["ld", "ap"])
@pytest.mark.parametrize("train,grid", [((4, 4), (4, 4)), ((3, 5), (3, 5)), ((4, 4), (3, 5))])
def test_comrope_matches_the_authors_code(variant, train, grid):
    pe = randomize(make_encoding("comrope", grid=train, dim=64, heads=2, depth=2, prefix=1, variant=variant), 0.5)
    q, k, rq, rk = rotate(pe, grid, block=1)
    rot = comrope_reference(pe, grid, 1)  # interpolate: normalised by the current grid, as theirs
    torch.testing.assert_close(rq.double(), apply_reference(q, rot), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rk.double(), apply_reference(k, rot), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("block_size", [None, 4])
@pytest.mark.parametrize("train,grid", [((4, 4), (4, 4)), ((3, 5), (3, 5)), ((4, 4), (3, 5))])
def test_liere_matches_the_authors_code(block_size, train, grid):
    pe = make_encoding("liere", grid=train, dim=32, heads=2, depth=2, prefix=1, block_size=block_size)
    q, k, rq, rk = rotate(pe, grid, block=1)  # the authors' initialization: entries ~ U[0, 2 pi)
    rot = liere_reference(pe, grid, 1)
    torch.testing.assert_close(rq.double(), apply_reference(q, rot), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(rk.double(), apply_reference(k, rot), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(rq[:, :, 0], q[:, :, 0])  # the class token: not rotated


# ----------------------------------------------------------------- relative or not
@pytest.mark.parametrize("variant", ["ld", "ap"])
@pytest.mark.parametrize("strategy", ["interpolate", "extrapolate"])
def test_comrope_logits_depend_on_the_offset_only(variant, strategy):
    pe = randomize(make_encoding("comrope", grid=(3, 5), variant=variant, strategy=strategy), 1.0)
    for grid in [(3, 5), (4, 6)]:
        assert max(spread_per_offset(logits_of_constant_tokens(pe, grid), grid).values()) < 1e-4


def test_liere_is_not_relative_with_random_generators():
    pe = make_encoding("liere", grid=(3, 5))
    assert max(spread_per_offset(logits_of_constant_tokens(pe, (3, 5)), (3, 5)).values()) > 0.1


@pytest.mark.parametrize("case", ["shared generator", "no column generator", "block size 2"])
def test_liere_is_relative_with_commuting_generators(case):
    pe = make_encoding("liere", grid=(3, 5), block_size=2 if case == "block size 2" else None)
    with torch.no_grad():
        if case == "shared generator":
            pe.generators[:, :, 1] = pe.generators[:, :, 0]
        elif case == "no column generator":
            pe.generators[:, :, 1] = 0.0
    assert max(spread_per_offset(logits_of_constant_tokens(pe, (3, 5)), (3, 5)).values()) < 1e-3


# ----------------------------------------------------------------- what ComRoPE reduces to
@pytest.mark.parametrize("name,opts", [("comrope", {"variant": "ld"}), ("comrope", {"variant": "ap"}), ("liere", {})])
def test_zero_generators_leave_q_and_k_unchanged(name, opts):
    pe = make_encoding(name, grid=(3, 5), prefix=1, **opts)
    with torch.no_grad():
        next(pe.parameters()).zero_()  # P (ComRoPE) or the generators (LieRE)
    q, k, rq, rk = rotate(pe, (3, 5))
    torch.testing.assert_close(rq, q)
    torch.testing.assert_close(rk, k)


def test_comrope_ap_with_block_size_2_is_rope_2d():
    """theta_j = n_axis * base^(-4i/Dh) on block j (axis j mod 2) gives rope_2d's logits, the channel
    pairs reordered (here rows and columns alternate; rope_2d puts the column pairs first)."""
    grid, dh = (3, 5), 16
    rope = make_encoding("rope_2d", grid=grid, prefix=1)
    pe = make_encoding("comrope", grid=grid, prefix=1, variant="ap", block_size=2, cls_position=None)
    inv = rope.base ** (-torch.arange(dh // 4) * 4 / dh)  # (Dh/4,)
    pair_of_block = [dh // 4 + j // 2 if j % 2 == 0 else j // 2 for j in range(dh // 2)]  # rope_2d: x pairs first
    # patch-patch logits only: an unrotated class token sits at each encoding's origin, which differ by
    # half a cell (ComRoPE's coordinates are patch centres (i + 0.5) / n)
    with torch.no_grad():
        pe.freqs.zero_()
        for j in range(dh // 2):
            pe.freqs[:, :, j, 1, 0] = inv[j // 2] * grid[j % 2]  # P - P^T = theta [[0, -1], [1, 0]]
    q, k = qk(pe, grid)
    channels = torch.tensor([2 * pair_of_block[j] + c for j in range(dh // 2) for c in (0, 1)])
    perm = torch.empty_like(channels)
    perm[channels] = torch.arange(dh)  # rope channel c holds ComRoPE channel perm[c]
    rq, rk = pe.rotate_qk(q, k, grid, 0)
    pq, pk = rope.rotate_qk(q[..., perm], k[..., perm], grid, 0)
    logits, rope_logits = rq @ rk.transpose(-1, -2), pq @ pk.transpose(-1, -2)  # (B, H, T, T)
    torch.testing.assert_close(logits[..., 1:, 1:], rope_logits[..., 1:, 1:], rtol=1e-5, atol=1e-4)


def test_comrope_ld_with_one_hot_theta_is_ap_and_with_theta_one_turns_with_x_plus_y():
    ld = randomize(make_encoding("comrope", grid=(4, 4), variant="ld"))
    ap = make_encoding("comrope", grid=(4, 4), variant="ap")
    with torch.no_grad():
        ap.freqs.copy_(ld.freqs)
        ld.multiplier.copy_(ap.axis_mask.expand_as(ld.multiplier))
    torch.testing.assert_close(ld.rotation((4, 4), 1, "cpu"), ap.rotation((4, 4), 1, "cpu"))
    with torch.no_grad():
        ld.multiplier.fill_(1.0)
    rot = ld.rotation((4, 4), 0, "cpu")  # tokens (0, 1) and (1, 0): the same x_0 + x_1
    torch.testing.assert_close(rot[:, 1], rot[:, 4])
    assert (rot[:, 1] - rot[:, 2]).abs().max() > 1e-2


# ----------------------------------------------------------------- rotations, strategies, precision
@pytest.mark.parametrize("name,opts", [("comrope", {"variant": "ld"}), ("comrope", {"variant": "ap"}), ("liere", {})])
def test_rotations_are_orthogonal(name, opts):
    pe = make_encoding(name, grid=(3, 5), prefix=1, **opts)  # the default initializations
    rot = pe.rotation((3, 5), 1, "cpu")  # (H, T, Dh, Dh)
    eye = torch.eye(rot.shape[-1]).expand_as(rot)
    torch.testing.assert_close(rot @ rot.transpose(-1, -2), eye, rtol=0, atol=1e-4)
    assert (rot - eye)[:, 1:].abs().amax() > 0.1  # and not the identity


def test_comrope_strategies_scale_or_keep_the_training_spacing():
    pe = randomize(make_encoding("comrope", grid=(3, 3)), 1.0)
    trained = logits_of_constant_tokens(pe, (3, 3))  # token 4 = cell (1, 1)
    pe.strategy = "interpolate"  # a grid twice as fine: 2 cells there are 1 cell on the training grid
    fine = logits_of_constant_tokens(pe, (6, 6))  # token 14 = cell (2, 2)
    torch.testing.assert_close(fine[:, 0, 14], trained[:, 0, 4], rtol=1e-4, atol=1e-4)
    pe.strategy = "extrapolate"  # the training spacing: 1 cell is 1 cell
    wide = logits_of_constant_tokens(pe, (6, 6))  # token 7 = cell (1, 1)
    torch.testing.assert_close(wide[:, 0, 7], trained[:, 0, 4], rtol=1e-4, atol=1e-4)
    assert (wide[:, 0, 14] - trained[:, 0, 4]).abs().max() > 1e-2  # so the two differ


def test_liere_strategies_place_the_positions():
    pe = make_encoding("liere", grid=(4, 4))
    expected = {
        "proportional": torch.linspace(0, 1.5, 6),  # the authors': linspace(0, n / n_train, n)
        "interpolate": torch.linspace(0, 1, 6),
        "extrapolate": torch.arange(6) / 3,
    }
    rows = {"proportional": 0.5, "interpolate": 1.0, "extrapolate": 1 / 3}  # the second of 2 rows
    for strategy, cols in expected.items():
        pe.strategy = strategy
        coords = pe.coordinates((2, 6))  # (12, 2) (row, column)
        torch.testing.assert_close(coords[:6, 1], cols)
        torch.testing.assert_close(coords[::6, 0], torch.tensor([0.0, rows[strategy]]))
    with pytest.raises(OptionError, match="encoding.strategy"):
        pe.strategy = "ntk"


@pytest.mark.parametrize("grad", [True, False])  # built afresh (training) or cached (evaluation)
@pytest.mark.parametrize("name", ["comrope", "liere"])
def test_bf16_autocast_is_close_to_float32(name, grad):
    pe = make_encoding(name, grid=(3, 5), prefix=1)
    q, k = qk(pe, (3, 5))
    rq, rk = pe.rotate_qk(q, k, (3, 5), 0)
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.set_grad_enabled(grad):
        bq, bk = pe.rotate_qk(q.bfloat16(), k.bfloat16(), (3, 5), 0)
        assert pe.rotation((3, 5), 0, "cpu").dtype == torch.float32
    assert bq.dtype == bk.dtype == torch.bfloat16
    for low, ref in ((bq, rq), (bk, rk)):
        assert (low.float() - ref).norm() / ref.norm() < 1e-2  # bf16 inputs: ~0.3 % each


# ----------------------------------------------------------------- cache, gradients, options
@pytest.mark.parametrize("name", ["comrope", "liere"])
def test_evaluation_caches_rotations_until_a_parameter_changes(name):
    pe = make_encoding(name, grid=(3, 5), prefix=1).eval()
    with torch.no_grad():
        first = pe.rotation((3, 5), 1, "cpu")
        assert pe.rotation((3, 5), 1, "cpu") is first  # reused
    opt = torch.optim.SGD(pe.parameters(), lr=0.1)
    q, k = qk(pe, (3, 5))
    rq, rk = pe.rotate_qk(q, k, (3, 5), 1)  # with gradients: built afresh, differentiable
    (rq.sum() + 2 * rk.sum()).backward()  # not rq . rk: a logit of one token with itself ignores R
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in pe.parameters())
    opt.step()
    with torch.no_grad():
        after = pe.rotation((3, 5), 1, "cpu")
    assert after is not first and (after - first).abs().max() > 1e-4
    torch.testing.assert_close(after, pe.rotation((3, 5), 1, "cpu").detach())


@pytest.mark.parametrize(
    "name,opts,option",
    [
        ("comrope", {"block_size": 3}, "encoding.block_size"),
        ("comrope", {"variant": "ap", "block_size": 16}, "encoding.block_size"),  # AP: 2 b must divide Dh = 16
        ("comrope", {"variant": "xy"}, "encoding.variant"),
        ("comrope", {"cls_position": "centre"}, "encoding.cls_position"),
        ("comrope", {"init_std": -1.0}, "encoding.init_std"),
        ("liere", {"block_size": 5}, "encoding.block_size"),
        ("liere", {"block_size": 1}, "encoding.block_size"),
    ],
)
def test_bad_options_name_the_option(name, opts, option):
    with pytest.raises(OptionError, match=option):
        make_encoding(name, **opts)


def test_comrope_rotates_the_class_token_at_the_centre_unless_told_not_to():
    centre = make_encoding("comrope", grid=(3, 3), prefix=1)
    rot = centre.rotation((3, 3), 0, "cpu")
    torch.testing.assert_close(rot[:, 0], rot[:, 1 + 4])  # cls at (0.5, 0.5) = the centre patch of a 3 x 3 grid
    plain = make_encoding("comrope", grid=(3, 3), prefix=1, cls_position=None)
    torch.testing.assert_close(plain.rotation((3, 3), 0, "cpu")[:, 0], torch.eye(16).expand(2, -1, -1))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["liere", "comrope"])
def test_inductor_evaluation_equals_eager(name):
    """Inductor (not aot_eager) without gradients: LieRE's p_0 A_0 + p_1 A_1 once reached matrix_exp's
    fallback kernel non-contiguous there, and failed (~10 s of C++ compilation each)."""
    torch._dynamo.reset()
    model = small_vit(name)  # eval mode
    compiled = CompiledForward(model)
    with torch.no_grad():
        for size in (16, 24):
            x = torch.randn(2, 3, size, size)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
