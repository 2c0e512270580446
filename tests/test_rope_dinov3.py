"""DINOv3 RoPE (``rope_2d_dinov3``): equal to timm's ``RotaryEmbeddingDinoV3`` applied as timm's ViT
does, and to DINOv3's own computation rebuilt here, at a square and a non-square grid with and
without a class token; the coordinate augmentations act in training only, follow torch's RNG,
keep norms; logits depend on offsets only; bf16 close to float32; bad options are named."""

import itertools
import math

import pytest
import torch
from conftest import make_encoding, small_vit
from timm.layers.pos_embed_sincos import RotaryEmbeddingDinoV3, apply_rot_embed_cat

from vitpos.encodings import OptionError

GRIDS = [(4, 4), (3, 5)]
DIM, HEADS, DH = 64, 2, 32
SETTINGS = [
    {},  # DINOv3's defaults: base 100, separate
    {"base": 10.0, "normalize_coords": "min"},
    {"normalize_coords": "max"},
    {"base": None, "min_period": 0.5, "max_period": 20.0},
]
AUGS = {"shift_coords": 0.3, "jitter_coords": 1.5, "rescale_coords": 2.0}


def encoding(grid, prefix=0, train=False, **options):
    pe = make_encoding("rope_2d_dinov3", grid=grid, dim=DIM, heads=HEADS, prefix=prefix, **options)
    return pe.train(train)


def qk(grid, prefix, dtype=torch.float32):
    g = torch.Generator().manual_seed(7)
    n = prefix + math.prod(grid)
    return [torch.randn(2, HEADS, n, DH, generator=g).to(dtype) for _ in range(2)]  # (B, H, P + N, Dh) each


def timm_rotate(q, k, grid, prefix, train=False, base=100.0, **kw):
    """timm's RotaryEmbeddingDinoV3, applied as timm's Eva attention does (prefix tokens kept)."""
    rope = RotaryEmbeddingDinoV3(DH, temperature=base, feat_shape=list(grid), rotate_half=True, **kw).train(train)
    emb = rope.get_embed()  # (N, 2 Dh): sin, cos

    def apply(t):
        return torch.cat([t[:, :, :prefix], apply_rot_embed_cat(t[:, :, prefix:], emb, half=True)], dim=2)

    return apply(q), apply(k)


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("prefix", [0, 1])
@pytest.mark.parametrize("options", SETTINGS)
def test_equals_timm_without_augmentation(grid, prefix, options):
    q, k = qk(grid, prefix)
    want = timm_rotate(q, k, grid, prefix, **options)
    for pe in (encoding(grid, prefix, **options), encoding(grid, prefix, train=True, rescale_coords=None, **options)):
        got = pe.rotate_qk(q, k, grid, 0)  # eval with the default rescale, or training without augmentation
        torch.testing.assert_close(got[0], want[0])
        torch.testing.assert_close(got[1], want[1])
    assert not torch.allclose(got[0], q)


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("prefix", [0, 1])
def test_augmented_training_rotation_equals_timm_with_the_same_seed(grid, prefix):
    q, k = qk(grid, prefix)
    pe = encoding(grid, prefix, train=True, **AUGS)  # built first: make_encoding seeds the RNG
    torch.manual_seed(11)
    want = timm_rotate(q, k, grid, prefix, train=True, **AUGS)
    torch.manual_seed(11)
    got = pe.rotate_qk(q, k, grid, 0)
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])
    plain = timm_rotate(q, k, grid, prefix)
    assert not torch.allclose(got[0], plain[0])  # the augmentation did act


def dinov3_reference(h, w, head_dim, training, base=100.0, min_period=None, max_period=None, **kw):
    """DINOv3's RopePositionEmbedding.forward in our words (dinov3/layers/rope_position_encoding.py,
    commit 2ff68bee of an unmodified copy), in float32: periods, 0.5-centred coordinates over the
    normaliser, mapped to [-1, 1], the augmentations in their order, angles tiled twice. -> (sin, cos)."""
    mode = kw.get("normalize_coords", "separate")
    if base is not None and min_period is None:
        periods = base ** (2 * torch.arange(head_dim // 4, dtype=torch.float32) / (head_dim // 2))
    else:
        ratio = max_period / min_period
        periods = ratio ** torch.linspace(0, 1, head_dim // 4, dtype=torch.float32) / ratio * max_period
    dh, dw = {"separate": (h, w), "min": (min(h, w),) * 2, "max": (max(h, w),) * 2}[mode]
    ch, cw = torch.arange(0.5, h) / dh, torch.arange(0.5, w) / dw
    coords = 2.0 * torch.stack(torch.meshgrid(ch, cw, indexing="ij"), -1).flatten(0, 1) - 1.0  # (HW, 2)
    if training and kw.get("shift_coords") is not None:
        coords = coords + torch.empty(2).uniform_(-kw["shift_coords"], kw["shift_coords"])[None]
    if training and kw.get("jitter_coords") is not None:
        m = math.log(kw["jitter_coords"])
        coords = coords * torch.empty(2).uniform_(-m, m).exp()[None]
    if training and kw.get("rescale_coords") is not None:
        m = math.log(kw["rescale_coords"])
        coords = coords * torch.empty(1).uniform_(-m, m).exp()
    angles = (2 * math.pi * coords[:, :, None] / periods[None, None, :]).flatten(1, 2).tile(2)  # (HW, Dh)
    return angles.sin(), angles.cos()


def dinov3_apply(x, sin, cos):
    """SelfAttention.apply_rope + rope_apply (dinov3/layers/attention.py): prefix = N - HW tokens kept."""
    prefix = x.shape[-2] - sin.shape[-2]
    t = x[:, :, prefix:]
    half = torch.cat([-t[..., DH // 2 :], t[..., : DH // 2]], -1)  # rotate_half
    return torch.cat([x[:, :, :prefix], t * cos + half * sin], dim=2)


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("prefix", [0, 1])
@pytest.mark.parametrize("options", SETTINGS[1:] + [AUGS])
def test_equals_dinov3s_own_computation(grid, prefix, options):
    q, k = qk(grid, prefix)
    train = "rescale_coords" in options
    pe = encoding(grid, prefix, train=train, **options)
    torch.manual_seed(5)
    sin, cos = dinov3_reference(*grid, DH, train, **options)
    torch.manual_seed(5)
    got_q, got_k = pe.rotate_qk(q, k, grid, 0)
    torch.testing.assert_close(got_q, dinov3_apply(q, sin, cos))
    torch.testing.assert_close(got_k, dinov3_apply(k, sin, cos))


def test_augmentation_acts_in_training_only_is_seeded_and_shared_by_the_blocks():
    grid = (3, 5)
    pe = encoding(grid, **AUGS)
    plain = pe.rotation(grid, 0, torch.device("cpu"))
    torch.manual_seed(0)
    assert torch.equal(pe.rotation(grid, 0, torch.device("cpu")), plain)  # eval: no draw, whatever the RNG
    pe.train()
    draws = []
    for seed in (1, 1, 2):
        torch.manual_seed(seed)
        first = pe.rotation(grid, 0, torch.device("cpu"))
        assert pe.rotation(grid, 1, torch.device("cpu")) is first  # later blocks reuse the forward's draw
        draws.append(first)
    assert torch.equal(draws[0], draws[1]) and not torch.allclose(draws[0], draws[2])
    assert not torch.allclose(draws[0], plain)
    torch.testing.assert_close(draws[0].abs(), torch.ones_like(plain.real))  # unit rotations: norms kept
    q, k = qk(grid, 0)
    rq, rk = pe.rotate_qk(q, k, grid, 0)
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1))
    torch.testing.assert_close(rk.norm(dim=-1), k.norm(dim=-1))


def offset_logits(pe, grid):
    """{(dy, dx): [logits (H,)]} for the same q and k content at every position."""
    n = math.prod(grid)
    q = torch.randn(1, HEADS, 1, DH).expand(1, HEADS, n, DH)
    k = torch.randn(1, HEADS, 1, DH).expand(1, HEADS, n, DH)
    rq, rk = pe.rotate_qk(q, k, grid, 0)
    logits = rq @ rk.transpose(-1, -2)  # (1, H, N, N)
    coords = list(itertools.product(range(grid[0]), range(grid[1])))
    by_offset = {}
    for i, j in itertools.product(range(n), repeat=2):
        off = (coords[i][0] - coords[j][0], coords[i][1] - coords[j][1])
        by_offset.setdefault(off, []).append(logits[0, :, i, j])
    return by_offset


@pytest.mark.parametrize("strategy", ["normalize", "extrapolate"])
@pytest.mark.parametrize("grid", [(3, 5), (6, 4)])
def test_logits_depend_only_on_offsets(strategy, grid):
    by_offset = offset_logits(encoding((3, 5), strategy=strategy), grid)
    spread = max((torch.stack(v) - v[0]).abs().max() for v in by_offset.values())
    assert spread < 1e-4
    assert torch.stack([v[0] for v in by_offset.values()]).std(0).min() > 1e-2  # and on the offset


def test_a_shift_changes_no_logit_a_rescale_does():
    grid = (3, 5)
    pe = encoding(grid)
    torch.manual_seed(0)
    plain = offset_logits(pe, grid)
    for options, same in (({"shift_coords": 0.5, "rescale_coords": None}, True), (AUGS, False)):
        pe = encoding(grid, train=True, **options)
        torch.manual_seed(0)  # the same q and k as for plain
        aug = offset_logits(pe, grid)
        diff = max((torch.stack(aug[o]) - torch.stack(plain[o])).abs().max() for o in plain)
        assert (diff < 1e-4) == same, (options, diff)


def test_normalize_fills_the_box_extrapolate_keeps_the_training_spacing():
    cpu = torch.device("cpu")
    norm, extra = encoding((4, 4)), encoding((4, 4), strategy="extrapolate")
    assert torch.equal(norm.rotation((4, 4), 0, cpu), extra.rotation((4, 4), 0, cpu))  # same on the training grid
    big = (8, 8)
    c_norm, c_extra = norm.coords(big, cpu), extra.coords(big, cpu)
    assert c_norm.min() == -1 + 1 / 8 and c_norm.max() == 1 - 1 / 8  # the [-1, 1] box, spacing 2/8
    torch.testing.assert_close(c_extra[1] - c_extra[0], torch.tensor([0.0, 0.5]))  # spacing 2/4, as trained
    assert c_extra.max() > 1
    assert encoding((4, 4), strategy="interpolate").strategy == "normalize"


def test_bf16_close_to_float32():
    grid = (3, 5)
    pe = encoding(grid, prefix=1)
    q, k = qk(grid, 1)
    ref_q, ref_k = pe.rotate_qk(q, k, grid, 0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bq, bk = pe.rotate_qk(q.bfloat16(), k.bfloat16(), grid, 0)
    assert bq.dtype == torch.bfloat16 and pe.rotation(grid, 0, q.device).dtype == torch.complex64
    torch.testing.assert_close(bq.float(), ref_q, atol=3e-2, rtol=2e-2)
    torch.testing.assert_close(bk.float(), ref_k, atol=3e-2, rtol=2e-2)


def test_the_model_trains_with_the_augmentation_and_evaluates_without():
    model = small_vit("rope_2d_dinov3")
    images = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        evals = [model(images) for _ in range(2)]
        model.train()
        torch.manual_seed(3)
        a = model(images)
        torch.manual_seed(3)
        b = model(images)
        c = model(images)
    assert torch.equal(evals[0], evals[1]) and torch.equal(a, b)
    assert not torch.allclose(a, evals[0]) and not torch.allclose(a, c)


@pytest.mark.parametrize(
    "option,value,fix",
    [
        ({"base": -1.0}, "base", "e.g. DINOv3's 100.0"),
        ({"base": None}, "base", "set encoding.base=100.0 (DINOv3)"),
        ({"min_period": 1.0}, "max_period", "set both encoding.min_period and encoding.max_period"),
        ({"max_period": 0.0}, "max_period", "null: the periods come from encoding.base"),
        ({"normalize_coords": "diag"}, "normalize_coords", "valid: separate, min, max"),
        ({"shift_coords": -0.1}, "shift_coords", "must be null (off) or a number >= 0"),
        ({"jitter_coords": 0.5}, "jitter_coords", "a per-axis factor in [1/J, J]"),
        ({"rescale_coords": "two"}, "rescale_coords", "DINOv3's ViTs use rescale_coords=2"),
        ({"strategy": "ntk"}, "strategy", "valid: normalize, extrapolate"),
    ],
)
def test_bad_options_name_the_option_and_the_fix(option, value, fix):
    with pytest.raises(OptionError) as err:
        encoding((4, 4), **option)
    assert err.value.option == f"encoding.{value}" and fix in err.value.line(), err.value.line()
