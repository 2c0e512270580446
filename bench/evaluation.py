"""Evaluation throughput per resolution: images/s of the end-of-training test
pass (``torch.inference_mode``, eval batch 512) at each test resolution, for a
vit_tiny with a table (learned_1d), a rotation (rope_2d) and a bias
(rel_bias_2d), float32 and bf16 autocast. Peer: learned_1d at 32x32 fp32."""

from __future__ import annotations

import torch

from vitpos.models import VisionTransformer

from .step import ONE_PER_KIND, SHAPES
from .timing import header, interleaved_medians, table


def run(quick: bool, batch: int = 512, precisions: tuple[str, ...] = ("fp32", "bf16")) -> None:
    resolutions = [16, 32, 48] if quick else [16, 24, 32, 40, 48, 64]
    encodings = ONE_PER_KIND
    shape = "vit_micro" if quick else "vit_tiny"
    models = {n: VisionTransformer(n, patch_size=4, **SHAPES[shape]).eval() for n in encodings}
    calls = {}
    for res in resolutions:
        x = torch.randn(batch, 3, res, res)
        for prec in precisions:
            for name, model in models.items():

                def call(model=model, x=x, bf16=prec == "bf16"):
                    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                        model(x)

                calls[f"{name} @{res} {prec}"] = call
    times = interleaved_medians(calls, repeats=3 if quick else 7, warmup=1)
    peer = "learned_1d @32 fp32"
    header(f"evaluation throughput, {shape}, batch {batch}, inference_mode")
    rows = [[k, f"{batch / t:,.0f}", f"{times[peer] / t:.2f}x"] for k, t in times.items()]
    table(["model @resolution precision", "img/s", f"vs {peer}"], rows)
