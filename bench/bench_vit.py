"""A training step of vitpos' ViT vs timm's VisionTransformer of the same size.

    python bench/bench_vit.py [--model tiny|micro] [--batch 128]

Peer: ``timm.models.vision_transformer.VisionTransformer`` (patch 4 on 32x32,
no class token, average pooling, its learned position table), forward +
backward + AdamW step on the same batch. Ratios > 1 mean vitpos is faster.
"""

import argparse

import torch
import torch.nn.functional as F
from common import median_time, report
from timm.models.vision_transformer import VisionTransformer as TimmViT

from vitpos.encodings import list_encodings
from vitpos.models import VisionTransformer

SIZES = {
    "micro": dict(dim=64, depth=4, num_heads=4, mlp_ratio=2.0),
    "tiny": dict(dim=192, depth=6, num_heads=3, mlp_ratio=4.0),
}


def step_fn(model, x, y):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=list(SIZES), default="tiny")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--encodings", default="all", help="comma list of registry names, or all")
    a = p.parse_args()
    s = SIZES[a.model]
    torch.manual_seed(0)
    x, y = torch.randn(a.batch, 3, 32, 32), torch.randint(0, 10, (a.batch,))
    timm = TimmViT(img_size=32, patch_size=4, embed_dim=s["dim"], depth=s["depth"], num_heads=s["num_heads"],
                   mlp_ratio=s["mlp_ratio"], class_token=False, global_pool="avg", num_classes=10)  # fmt: skip
    rows = [("timm ViT (learned table)", median_time(step_fn(timm, x, y), repeats=10))]
    names = list_encodings(2) if a.encodings == "all" else a.encodings.split(",")
    for name in names:
        model = VisionTransformer(name, patch_size=4, drop_path=0.0, **s)
        rows.append((f"vitpos ViT {name}", median_time(step_fn(model, x, y), repeats=10)))
    print(f"train step, ViT-{a.model}, batch {a.batch}, 32x32, patch 4")
    report(rows, peer="timm ViT (learned table)", items=a.batch)


if __name__ == "__main__":
    main()
