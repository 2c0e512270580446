"""Training step (forward + backward + AdamW) of vitpos's ViT per encoding vs timm's VisionTransformer.

Peer: ``timm.models.vision_transformer.VisionTransformer`` of the same width,
depth, heads, MLP ratio and patch (no class token, average pooling, its learned
position table), with ``torch.optim.AdamW``'s defaults, as a timm user gets it;
vitpos uses its own optimizer builder (fused AdamW where torch has the kernel).
Same batch for all, float32 or bf16 autocast, eager or ``torch.compile``.
"% ceiling" = img/s / (measured 2048^2 matmul GFLOP/s / training FLOPs per image).
"""

from __future__ import annotations

import torch
import torch._dynamo
import torch.nn.functional as F
from timm.models.vision_transformer import VisionTransformer as TimmViT
from torch.utils.flop_counter import FlopCounterMode

from vitpos.encodings import list_encodings
from vitpos.errors import UserError
from vitpos.models import VisionTransformer
from vitpos.models.compile import CompiledForward
from vitpos.tasks.optim import build_optimizer

from .timing import header, interleaved_medians, matmul_gflops, table

SHAPES = {
    "vit_micro": dict(dim=64, depth=4, num_heads=4, mlp_ratio=2.0),
    "vit_tiny": dict(dim=192, depth=6, num_heads=3, mlp_ratio=4.0),
    "vit_cpu_d96": dict(dim=96, depth=4, num_heads=3, mlp_ratio=2.0),  # the comparison's model (compare_cifar_full)
}
BASELINE = "rope_2d"  # the "x rope_2d" column: each row's step time over rope_2d's of the same mode and precision
PEER = "timm eager fp32"
# the encodings of quick=true, and those compiled without compile_all=true: one per kind (table, rotation, bias)
ONE_PER_KIND = ["learned_1d", "rope_2d", "rel_bias_2d"]


def timm_vit(s: dict) -> torch.nn.Module:
    return TimmViT(img_size=32, patch_size=4, embed_dim=s["dim"], depth=s["depth"], num_heads=s["num_heads"],
                   mlp_ratio=s["mlp_ratio"], class_token=False, global_pool="avg", num_classes=10)  # fmt: skip


def make_step(model, forward, opt, x, y, bf16: bool):
    device = x.device.type

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(forward(x), y)
        loss.backward()
        opt.step()

    return step


def flops_per_image(model, x, y) -> float:
    """Forward + backward FLOPs per image (torch's FLOP counter; the optimizer is noise)."""
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / len(x)


def check_rows(shapes: list[str] | None, encodings: list[str] | None) -> None:
    """Unknown names in the row filters ``shapes=`` / ``encodings=`` raise :class:`UserError` with the valid ones."""
    for asked, valid, option in ((shapes, list(SHAPES), "shapes"), (encodings, list_encodings(2), "encodings")):
        unknown = [x for x in asked or [] if x not in valid]
        if unknown:
            raise UserError(option, f"unknown {', '.join(unknown)}", f"valid: {', '.join(valid)}")


def run(
    quick: bool,
    batch: int = 128,
    compile_all: bool = False,
    device: str = "cpu",
    compile_peer=None,
    shapes: list[str] | None = None,
    encodings: list[str] | None = None,
    precisions: tuple[str, ...] = ("fp32", "bf16"),
) -> None:
    """Print the training-step table per shape. ``shapes`` / ``encodings``: a subset of the rows
    (``shapes=[...]`` / ``encodings=[...]``); unknown names stop with the valid ones. ``precisions``:
    fp32 and/or bf16 (autocast) rows."""
    check_rows(shapes, encodings)
    shapes = shapes or (["vit_micro"] if quick else list(SHAPES))
    encodings = encodings or (ONE_PER_KIND if quick else list_encodings(2))
    compiled = [] if quick else (encodings if compile_all else [e for e in encodings if e in ONE_PER_KIND])
    compile_peer = (not quick) if compile_peer is None else compile_peer
    # every compiled model instance is one more compilation of the same forward code object; the
    # default limit (8) is meant for one model, and the full table compiles one per row
    for limit in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, limit):
            setattr(torch._dynamo.config, limit, max(getattr(torch._dynamo.config, limit), 256))
    ceiling = {p: matmul_gflops(torch.float32 if p == "fp32" else torch.bfloat16) for p in precisions}
    repeats = 5 if quick else 10
    for shape in shapes:
        s = SHAPES[shape]
        torch.manual_seed(0)
        x = torch.randn(batch, 3, 32, 32, device=device)
        y = torch.randint(0, 10, (batch,), device=device)
        flops = flops_per_image(timm_vit(s).to(device), x, y)
        steps, kinds = {}, {}
        for prec in precisions:
            bf16 = prec == "bf16"
            peer = timm_vit(s).to(device)
            steps[f"timm eager {prec}"] = make_step(peer, peer, torch.optim.AdamW(peer.parameters()), x, y, bf16)
            kinds[f"timm eager {prec}"] = prec
            if compile_peer:
                peer_c = timm_vit(s).to(device)
                fwd = torch.compile(peer_c)
                opt_c = torch.optim.AdamW(peer_c.parameters())
                steps[f"timm compiled {prec}"] = make_step(peer_c, fwd, opt_c, x, y, bf16)
                kinds[f"timm compiled {prec}"] = prec
            for name in encodings:
                for comp in (False, True) if name in compiled else (False,):
                    model = VisionTransformer(name, patch_size=4, drop_path=0.0, **s).to(device)
                    fwd = CompiledForward(model) if comp else model
                    opt = build_optimizer(model, 1e-4, 0.05)
                    label = f"vitpos {name} {'compiled' if comp else 'eager'} {prec}"
                    steps[label] = make_step(model, fwd, opt, x, y, bf16)
                    kinds[label] = prec
        times = interleaved_medians(steps, repeats, desc=f"training step, {shape}")
        header(f"training step, {shape} (d{s['dim']}/L{s['depth']}/h{s['num_heads']}), batch {batch}, 32x32, patch 4")
        tops = ", ".join(f"{p} {g:.0f} GFLOP/s = {g * 1e9 / flops:.0f} img/s" for p, g in ceiling.items())
        print(f"FLOPs per image (fwd+bwd): {flops / 1e9:.3f} GFLOP; matmul ceiling: {tops}")
        rows = []
        for name, t in times.items():
            rate = batch / t
            top = ceiling[kinds[name]] * 1e9 / flops
            rows.append([name, f"{t * 1e3:.1f}", f"{rate:,.0f}", f"{times[PEER] / t:.2f}x", f"{100 * rate / top:.0f}%"])
            if BASELINE in encodings:
                rows[-1].append(baseline_ratio(name, times))
        cols = ["step", "ms", "img/s", f"vs {PEER}", "% ceiling"] + ([f"x {BASELINE}"] if BASELINE in encodings else [])
        table(cols, rows)
    optimizer_table(device)


def baseline_ratio(label: str, times: dict[str, float]) -> str:
    """A vitpos row's step time over ``BASELINE``'s in the same mode and precision
    (``vitpos NAME eager bf16`` against ``vitpos rope_2d eager bf16``); blank for the peer rows."""
    parts = label.split(" ")
    if parts[0] != "vitpos":
        return ""
    base = " ".join(["vitpos", BASELINE, *parts[2:]])
    return f"{times[label] / times[base]:.2f}" if base in times else ""


def optimizer_table(device: str) -> None:
    """AdamW alone on a vit_tiny's parameters: the per-parameter loop vs foreach vs fused."""
    model = VisionTransformer("learned_1d", patch_size=4, **SHAPES["vit_tiny"]).to(device)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    opts = {impl: build_optimizer(model, 1e-4, 0.05, impl=impl) for impl in ("forloop", "foreach", "fused")}
    times = interleaved_medians({k: o.step for k, o in opts.items()}, repeats=10)
    header("AdamW step alone, vit_tiny parameters (2.7M)")
    rows = [[k, f"{t * 1e3:.2f}", f"{times['forloop'] / t:.2f}x"] for k, t in times.items()]
    table(["AdamW", "ms", "x vs forloop"], rows)
