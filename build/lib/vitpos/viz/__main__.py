"""Write every picture of a model as PNG files.

    python -m vitpos.viz ckpt=runs/cifar10/rope_2d/seed0/checkpoints/last.ckpt out=viz/ [n_images=4]
    python -m vitpos.viz encoding=rope_2d_mixed out=viz/     # a freshly initialized model

A checkpoint is one written by ``vitpos.tasks.classification.ImageClassifier``.
Attention maps are drawn on the first test images of ``data.root`` from the
checkpoint's config when that folder exists (an ImageFolder tree such as
``data/cifar10/test``), else on random images, and the run says which.
Arguments are ``key=value`` pairs, as in the Hydra-style training command.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.image
import torch

from vitpos.cli import parse_args as parse_key_values

from .attention import attention_distance_data
from .pictures import pictures_for

DEFAULTS = {
    "ckpt": None,  # a checkpoint to draw; or
    "encoding": None,  # an encoding name to draw on a fresh VisionTransformer
    "out": "viz",
    "n_images": "4",
    "blocks": "all",  # blocks shown by the RoPE and bias pictures: all, or e.g. 0,5
    "seed": "0",
    "data_root": None,  # where the test images are, overriding the checkpoint's data.root
    "img_size": "32",  # fresh model only
    "patch_size": "4",
    "dim": "192",
    "depth": "6",
    "num_heads": "3",
    "pool": "gap",
}


def parse_args(argv: list[str]) -> dict:
    args = parse_key_values(argv, DEFAULTS, usage=__doc__)
    if (args["ckpt"] is None) == (args["encoding"] is None):
        raise SystemExit(f"give exactly one of ckpt=PATH or encoding=NAME\n\n{__doc__}")
    return args


def load_model(args: dict[str, str]) -> tuple[torch.nn.Module, dict]:
    """The VisionTransformer, and the config it was trained with ({} for a fresh model)."""
    if args["ckpt"] is None:
        from vitpos.models import VisionTransformer

        keys = ("img_size", "patch_size", "dim", "depth", "num_heads")
        model = VisionTransformer(args["encoding"], pool=args["pool"], **{k: int(args[k]) for k in keys})
        return model, {}
    path = Path(args["ckpt"])
    if not path.is_file():
        raise SystemExit(f"no checkpoint at {path}")
    from vitpos.tasks.classification import ImageClassifier

    module = ImageClassifier.load_from_checkpoint(path, map_location="cpu")
    return module.model, dict(module.hparams.get("cfg", module.hparams))


def load_images(cfg: dict, n: int, seed: int) -> tuple[torch.Tensor, str]:
    """``n`` test images spread over the test set of the checkpoint's data
    config, prepared exactly as in evaluation; random images when there is no
    data config or the data is not there (and the returned text says so)."""
    from vitpos.data.cifar10 import DatasetNotFoundError
    from vitpos.data.images import ImageDataModule

    data = {k: v for k, v in (cfg.get("data") or {}).items() if k != "num_classes"}
    reason = "a fresh model has no data config"
    if data:
        try:
            datamodule = ImageDataModule(**{**data, "download": False})
            datamodule.setup("test")
            images, labels = datamodule.test
            picks = torch.linspace(0, len(images) - 1, n).long()
            prepared, _ = datamodule.prepare_batch((images[picks], labels[picks]), train=False)
            return prepared, f"{n} test images of {data.get('name')}"
        except (DatasetNotFoundError, OSError, ValueError) as err:
            reason = f"the test images could not be loaded ({err})"
    gen = torch.Generator().manual_seed(seed)
    size = int(data.get("img_size", 32))
    return torch.randn(n, 3, size, size, generator=gen), f"{n} random images, as {reason}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    torch.manual_seed(int(args["seed"]))
    model, cfg = load_model(args)
    if args["data_root"] is not None:
        cfg = {**cfg, "data": {**(cfg.get("data") or {}), "root": args["data_root"]}}
    model.eval()
    depth = len(model.encoder.blocks)
    blocks = range(depth) if args["blocks"] == "all" else [int(b) for b in str(args["blocks"]).strip("()[]").split(",")]
    img_size = model.patch_size * model.pos.train_grid[0]
    images, source = load_images(cfg, int(args["n_images"]), int(args["seed"]))
    if images.shape[-1] != img_size:
        images = torch.nn.functional.interpolate(images, size=(img_size, img_size), mode="bicubic")
    print(f"encoding {model.pos.name}; attention drawn on {source}")
    out = Path(args["out"])
    out.mkdir(parents=True, exist_ok=True)
    for tag, img in pictures_for(model, images, blocks=tuple(blocks), n_images=len(images)).items():
        path = out / f"{tag.replace('/', '_')}.png"
        matplotlib.image.imsave(path, img)
        print(f"wrote {path}")
    dist = attention_distance_data(model, images)  # (depth, H)
    lines = ["block," + ",".join(f"head{h}" for h in range(dist.shape[1]))]
    lines += [f"{b}," + ",".join(f"{d:.4f}" for d in row) for b, row in enumerate(dist)]
    (out / "attn_distance.csv").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'attn_distance.csv'} (mean attention distance in patches, per block and head)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
