"""Each fast path equals its straightforward reference: AdamW kernels, the bias
mask built in the autocast dtype, capped smoke evaluation, threads per sweep job."""

import pytest
import torch
from conftest import EvalModule, small_vit

from bench.references import rotate_half_reference
from vitpos.extrapolate import evaluate_sizes
from vitpos.models.attention import build_attention_mask
from vitpos.runtime import resolve_threads
from vitpos.tasks.optim import adamw_implementation, build_optimizer


def run_adamw(impl: str, steps: int = 3) -> list[torch.Tensor]:
    model = small_vit("rope_2d_mixed")  # same seed: same weights for every impl
    opt = build_optimizer(model, lr=1e-2, weight_decay=0.05, impl=impl)
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        for p in model.parameters():
            p.grad = torch.randn(p.shape, generator=g)
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("impl", ["foreach", "fused"])
def test_adamw_kernels_equal_the_per_parameter_loop(impl):
    reference = run_adamw("forloop")
    for p, ref in zip(run_adamw(impl), reference):
        torch.testing.assert_close(p, ref, rtol=1e-5, atol=1e-6)


def test_adamw_auto_picks_fused_on_cpu_and_refuses_unknown_names():
    model = small_vit("none")
    assert adamw_implementation(model, "auto") == {"fused": True}  # torch >= 2.4 has a fused CPU kernel
    with pytest.raises(ValueError, match="optim.impl"):
        adamw_implementation(model, "fastest")


def test_bias_mask_in_bf16_equals_the_float32_mask_cast():
    torch.manual_seed(0)
    bias = torch.randn(2, 5, 5)
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    ref = build_attention_mask(bias, padding, True, 5, bias.device, torch.float32)
    fast = build_attention_mask(bias.bfloat16(), padding, True, 5, bias.device, torch.bfloat16)
    assert fast.dtype == torch.bfloat16
    keep = ref > torch.finfo(torch.float32).min / 2
    torch.testing.assert_close(fast.float()[keep], ref.bfloat16().float()[keep])
    assert (fast.float()[~keep] <= torch.finfo(torch.bfloat16).min / 2).all()  # masked stays masked


class _Batches:
    """Four test batches at any size; counts how many were drawn."""

    def __init__(self):
        self.drawn = 0

    def test_dataloader_at(self, size):
        g = torch.Generator().manual_seed(size)
        for _ in range(4):
            self.drawn += 1
            yield torch.randn(8, 3, size, size, generator=g), torch.randint(0, 10, (8,), generator=g)


def test_capped_evaluation_equals_the_full_one_on_its_batches():
    module = EvalModule(small_vit("sincos_2d"))
    data = _Batches()
    capped = evaluate_sizes(module, data, [16, 24], ["extrapolate"], "res", progress=False, max_batches=1)
    assert data.drawn == 2  # one batch per size, the loader stops there

    class _First(_Batches):
        def test_dataloader_at(self, size):
            return [next(iter(super().test_dataloader_at(size)))]

    full_on_first = evaluate_sizes(module, _First(), [16, 24], ["extrapolate"], "res", progress=False)
    assert capped == pytest.approx(full_on_first)


def test_threads_per_job(monkeypatch):
    import vitpos.runtime as rt

    monkeypatch.setattr(rt, "usable_cores", lambda: 8)
    assert resolve_threads("auto", 2) == 4
    assert resolve_threads("auto", 16) == 1
    assert resolve_threads(3, 2) == 3 and resolve_threads(None) is None
    for bad in (0, -1, True, "many"):
        with pytest.raises(ValueError, match="threads="):
            resolve_threads(bad)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_compiled_rotation_equals_eager_and_rotate_half(layout):
    """Under torch.compile the half layout takes its real-arithmetic form: same outputs and
    gradients as the eager complex multiply (and, for half, as the textbook rotate-half)."""
    from vitpos.encodings import functional as fn

    torch.manual_seed(0)
    angles = torch.outer(torch.arange(16.0), fn.rope_inv_freq(4, 10000.0))  # (N, Dh/2)
    rot = fn.rope_angles_to_complex(angles)
    x = torch.randn(2, 3, 16, 8, requires_grad=True)
    cotangent = torch.randn(2, 3, 16, 8)
    compiled = torch.compile(lambda t: fn.apply_rotary(t, rot, layout), fullgraph=True, dynamic=False)
    eager_out = fn.apply_rotary(x, rot, layout)
    (eager_grad,) = torch.autograd.grad(eager_out, x, cotangent)
    out = compiled(x)
    (grad,) = torch.autograd.grad(out, x, cotangent)
    torch.testing.assert_close(out, eager_out, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad, eager_grad, rtol=1e-5, atol=1e-6)
    if layout == "half":
        reference = rotate_half_reference(x, angles.cos(), angles.sin())
        torch.testing.assert_close(out, reference, rtol=1e-5, atol=1e-6)
