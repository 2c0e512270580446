"""Peak memory of a training step (forward + backward + AdamW), per encoding and precision.

tracemalloc does not see torch's allocations. On CUDA: ``torch.cuda.max_memory_allocated``
around the steps. On CPU: each configuration runs in a fresh subprocess that
builds the model, the batch and the optimizer, records its RSS, runs three
steps and reports the growth of the peak RSS (``resource.getrusage`` maxrss):
activations, gradients, AdamW state and allocator slack. Peer: timm's ViT fp32.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import torch

from .timing import header, table


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def child(spec: dict) -> dict:
    import torch.nn.functional as F

    from vitpos.models import VisionTransformer
    from vitpos.tasks.optim import build_optimizer

    from .step import SHAPES, timm_vit

    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    s = SHAPES[spec["shape"]]
    if spec["name"] == "timm":
        model = timm_vit(s).to(device)
        opt = torch.optim.AdamW(model.parameters())
    else:
        model = VisionTransformer(spec["name"], patch_size=4, drop_path=0.0, **s).to(device)
        opt = build_optimizer(model, 1e-4, 0.05)
    x = torch.randn(spec["batch"], 3, 32, 32, device=device)
    y = torch.randint(0, 10, (spec["batch"],), device=device)
    before = _rss_mb()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=spec["prec"] == "bf16"):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    if device == "cuda":
        return {"peak_mb": (torch.cuda.max_memory_allocated() - base) / 2**20}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"peak_mb": peak - before}


def measure(spec: dict) -> float:
    out = subprocess.run(
        [sys.executable, "-m", "bench.memory", json.dumps(spec)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_mb"]


def run(quick: bool, batch: int = 128) -> None:
    names = ["timm", "learned_1d", "rel_bias_2d"]
    if not quick:
        from vitpos.encodings import list_encodings

        names = ["timm", *list_encodings(2)]
    shapes = ["vit_micro"] if quick else ["vit_micro", "vit_tiny"]
    for shape in shapes:
        rows, peer = [], None
        for prec in ("fp32", "bf16"):
            for name in names:
                mb = measure({"name": name, "prec": prec, "shape": shape, "batch": batch})
                peer = mb if peer is None else peer
                rows.append([f"{'timm ViT' if name == 'timm' else 'vitpos ' + name} {prec}", f"{mb:.0f}",
                             f"{mb / peer:.2f}x"])  # fmt: skip
        where = "CUDA max_memory_allocated" if torch.cuda.is_available() else "CPU peak RSS growth"
        header(f"peak memory of a training step, {shape}, batch {batch} ({where})")
        table(["model", "MiB", "vs timm ViT fp32"], rows)


if __name__ == "__main__":
    print(json.dumps(child(json.loads(sys.argv[1]))))
