"""bf16-mixed: forward and backward under CPU autocast stay close to float32 for every encoding.

Tolerance (stated): on the same batch and weights, the logits' relative error
(||bf16 - fp32|| / ||fp32||) is below 3%, and the flattened gradient of the
whole model points the same way (cosine > 0.99) with a norm within 5%.
bfloat16 keeps 8 bits of mantissa (relative precision ~0.4% per op); a
2-block model accumulates a few of those.
"""

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from conftest import small_vit

from vitpos.encodings import create_encoding, list_encodings
from vitpos.models.attention import mask_dtype
from vitpos.models.seq_transformer import SequenceTransformer
from vitpos.runtime import resolve_precision


def logits_and_grad(model, forward, autocast: bool):
    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits, loss = forward()
    loss.backward()
    grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    return logits.float().detach(), grad


def assert_close_bf16(model, forward):
    logits32, grad32 = logits_and_grad(model, forward, autocast=False)
    logits16, grad16 = logits_and_grad(model, forward, autocast=True)
    assert torch.isfinite(logits16).all() and torch.isfinite(grad16).all()
    assert (logits16 - logits32).norm() / logits32.norm() < 0.03
    assert F.cosine_similarity(grad16, grad32, dim=0) > 0.99
    assert grad16.norm() / grad32.norm() == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("name", list_encodings(2))
def test_image_encoding_bf16_close_to_float32(name):
    model = small_vit(name).train()
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,), generator=g)

    def forward():
        logits = model(x)
        return logits, F.cross_entropy(logits, y)

    assert_close_bf16(model, forward)


@pytest.mark.parametrize("name", [n for n in list_encodings(1) if n != "combo"])
def test_sequence_encoding_bf16_close_to_float32(name):
    torch.manual_seed(0)
    model = SequenceTransformer(encoding=name, vocab_size=16, num_classes=16, max_len=16, dim=32, depth=2, num_heads=2)
    g = torch.Generator().manual_seed(0)
    tokens, targets = torch.randint(0, 16, (8, 16), generator=g), torch.randint(0, 16, (8, 16), generator=g)
    padding = torch.zeros(8, 16, dtype=torch.bool)
    padding[::2, 12:] = True  # half the rows padded: the padding mask meets the bias in bf16

    def forward():
        logits = model(tokens, padding)
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    assert_close_bf16(model, forward)


def reference_angles(pe, grid) -> torch.Tensor:
    """Float64 angles (N, Dh/2), or (H, N, Dh/2) for RoPE-Mixed, by which ``pe`` turns q and k on its training grid."""
    dh = pe.ctx.head_dim
    if pe.name == "rope_1d":
        inv = pe.base ** (-torch.arange(dh // 2, dtype=torch.float64) * 2 / dh)  # base^(-2i/Dh)
        return torch.outer(torch.arange(grid[0], dtype=torch.float64), inv)
    ys, xs = torch.meshgrid(*(torch.arange(n, dtype=torch.float64) for n in grid), indexing="ij")
    ys, xs = ys.flatten(), xs.flatten()  # (N,) each, row-major
    if pe.name == "rope_2d":
        inv = pe.base ** (-torch.arange(dh // 4, dtype=torch.float64) * 4 / dh)  # base^(-4i/Dh)
        return torch.cat([torch.outer(xs, inv), torch.outer(ys, inv)], -1)  # x pairs, then y pairs
    f = pe.freqs[0].detach().double()  # (H, Dh/2, 2): block 0's (fx, fy)
    return xs[None, :, None] * f[:, None, :, 0] + ys[None, :, None] * f[:, None, :, 1]  # (H, N, Dh/2)


@pytest.mark.parametrize("name,grid", [("rope_1d", (4096,)), ("rope_2d", (64, 64)), ("rope_2d_mixed", (64, 64))])
def test_rope_angles_stay_float32_under_autocast(name, grid):
    """At large positions a bfloat16 angle (8 significant bits) is off by up to
    8 radians near 4096 and 1/8 radian near 64; the rotation under bf16 autocast
    must instead match a float64 reference to float32 precision."""
    torch.manual_seed(0)
    pe = create_encoding(name, dim=32, num_heads=2, grid=grid)
    angles = reference_angles(pe, grid)
    expected = torch.polar(torch.ones_like(angles), angles)  # complex128
    q = torch.randn(1, 2, angles.shape[-2], 16).bfloat16()  # (B, H, N, Dh)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        rot = pe.rotation(grid, 0, q.device)
        rq, _ = pe.rotate_qk(q, q, grid, 0)
    assert rot.dtype == torch.complex64 and rq.dtype == torch.bfloat16
    table_error = (rot.to(torch.complex128) - expected).abs().max()
    bf16_error = (torch.polar(torch.ones_like(angles), angles.bfloat16().double()) - expected).abs().max()
    assert table_error < 1e-3 < bf16_error  # the check tells float32 angles from bfloat16 ones
    # end to end: the bf16 q, rotated in float64, rounded once to bf16 (relative error 2^-9)
    pairs = torch.view_as_complex(q.double().unflatten(-1, (8, 2)))  # (B, H, N, Dh/2)
    want = torch.view_as_real(pairs * expected).flatten(-2)  # (B, H, N, Dh)
    assert ((rq.double() - want).abs() / want.abs().clamp(min=1e-3)).median() < 4e-3
    assert (rq.double() - want).abs().max() < 2e-2 * q.abs().max()


def test_attention_bias_is_built_in_the_query_dtype():
    x = torch.randn(2, 16, 32)
    assert mask_dtype(x) == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert mask_dtype(x) == torch.bfloat16
        model = small_vit("rel_bias_2d")
        masks = model.encoder.masks(model.pos, (4, 4), 16, x.device, mask_dtype(x))
    assert all(m.dtype == torch.bfloat16 for m in masks)


def test_precision_auto_resolves_per_device(monkeypatch):
    import vitpos.runtime as rt

    assert resolve_precision("32-true") == "32-true"  # anything but auto passes through
    monkeypatch.setattr(rt, "cpu_supports_bf16", lambda: True)
    assert resolve_precision("auto", "cpu") == "bf16-mixed"
    monkeypatch.setattr(rt, "cpu_supports_bf16", lambda: False)
    assert resolve_precision("auto", "cpu") == "32-true"


def test_run_identity_sees_auto_precision_resolved_and_ignores_compile(monkeypatch):
    import vitpos.runtime as rt
    from vitpos.run.identity import config_hash

    def cfg(precision, compile=False):
        return {"model": {"dim": 8, "compile": compile}, "encoding": {}, "data": {}, "optim": {}, "task": {},
                "trainer": {"precision": precision, "accelerator": "cpu"}}  # fmt: skip

    monkeypatch.setattr(rt, "cpu_supports_bf16", lambda: False)
    assert config_hash(cfg("auto")) == config_hash(cfg("32-true"))  # old runs keep their folders
    monkeypatch.setattr(rt, "cpu_supports_bf16", lambda: True)
    assert config_hash(cfg("auto")) == config_hash(cfg("bf16-mixed")) != config_hash(cfg("32-true"))
    assert config_hash(cfg("auto", compile=True)) == config_hash(cfg("auto"))


@pytest.mark.slow
def test_torch_held_to_avx2_kernels_trains_as_an_avx2_machine():
    """``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2`` (torch's own switches) make any CPU an
    AVX2-only one: bf16 is emulated there, so ``auto`` picks float32 and the run's record says
    ``cpu-avx2``, whatever the CPU could do."""
    code = (
        "from vitpos.runtime import cpu_supports_bf16, machine_kind, resolve_precision;"
        "print(cpu_supports_bf16(), machine_kind('cpu'), resolve_precision('auto', 'cpu'))"
    )
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    said = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert said.split() == ["False", "cpu-avx2", "32-true"], said
