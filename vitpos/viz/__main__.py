"""Write every picture of a model as PNG files.

usage: python -m vitpos.viz ckpt=PATH [out=viz] [n_images=4] [blocks=all|0,5] [data_root=DIR] [seed=0]
       python -m vitpos.viz encoding=NAME [out=viz] [img_size=32] [patch_size=4] [dim=192] [depth=6]
                            [num_heads=3] [pool=gap|cls]

    python -m vitpos.viz ckpt=runs/shapes/sincos_2d/seed0/checkpoints/last.ckpt out=viz/
    python -m vitpos.viz encoding=rope_2d_mixed out=viz/     # a freshly initialized ViT

``ckpt`` is a ``last.ckpt`` (or any ``.ckpt``) written by a vitpos training
run, image or sequence; it is loaded with ``weights_only=True``, so a file that
needs arbitrary Python objects is refused. Image checkpoints get the encoding
pictures on their patch grid, attention maps and the mean attention distance
(``attn_distance.csv``), drawn on test images of the checkpoint's data when
they can be loaded (``data_root=`` overrides its ``data.root``), else on random
images, and the run says which. Sequence checkpoints get the 1D pictures of
their encoding on the training length: similarity of the position table,
RoPE logit vs offset, ALiBi / relative (T5) bias vs offset; encodings without
any (``none``) write no picture and say so. Arguments are ``key=value`` pairs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.image
import torch

from vitpos.cli import parse_args as parse_key_values
from vitpos.validate import UserError

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
        raise UserError("ckpt/encoding", "give exactly one of ckpt=PATH or encoding=NAME", "--help for the usage")
    return args


def load_model(args: dict[str, str]) -> tuple[torch.nn.Module, dict]:
    """The model (a VisionTransformer or a SequenceTransformer), and the config it
    was trained with ({} for a fresh model)."""
    if args["ckpt"] is None:
        from vitpos.models import VisionTransformer

        keys = ("img_size", "patch_size", "dim", "depth", "num_heads")
        try:
            model = VisionTransformer(args["encoding"], pool=args["pool"], **{k: int(args[k]) for k in keys})
        except (KeyError, TypeError, ValueError) as err:  # unknown name, options or geometry: the user's input
            raise UserError(f"encoding={args['encoding']}", str(err.args[0] if err.args else err)) from None
        return model, {}
    from vitpos.safe_load import CheckpointError, load_checkpoint, task_kind

    checkpoint = load_checkpoint(args["ckpt"])  # weights_only=True; CheckpointError names the file
    cfg = dict(checkpoint["hyper_parameters"]["cfg"])  # the module's own config, as it was saved
    if task_kind(cfg) == "len":
        from vitpos.tasks.sequence import SequenceTask as Task
    else:
        from vitpos.tasks.classification import ImageClassifier as Task
    module = Task(cfg)
    try:
        module.load_state_dict(checkpoint["state_dict"])
    except RuntimeError as err:
        msg = f"ckpt={args['ckpt']}: its weights do not fit the model its config describes: {err}"
        raise CheckpointError(msg) from None
    return module.model, cfg


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


def write_sequence_pictures(model, blocks: tuple[int, ...], out: Path) -> int:
    """The encoding pictures of a sequence model on its training length (1D grid)."""
    pictures = pictures_for(model, blocks=blocks)
    print(f"encoding {model.pos.name} (sequence model, length {model.pos.train_grid[0]}); no attention maps")
    if not pictures:
        print(
            f"encoding '{model.pos.name}' has no table, rotation or bias to draw: the sequence pictures are the "
            "position similarity (sincos_1d, learned_1d), the RoPE logit vs offset (rope_*) and the bias vs "
            "offset (alibi, rel_bias_1d)"
        )
        return 0
    out.mkdir(parents=True, exist_ok=True)
    for tag, img in pictures.items():
        path = out / f"{tag.replace('/', '_')}.png"
        matplotlib.image.imsave(path, img)
        print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    torch.manual_seed(int(args["seed"]))
    model, cfg = load_model(args)
    if args["data_root"] is not None:
        cfg = {**cfg, "data": {**(cfg.get("data") or {}), "root": args["data_root"]}}
    model.eval()
    depth = len(model.encoder.blocks)
    blocks = range(depth) if args["blocks"] == "all" else [int(b) for b in str(args["blocks"]).strip("()[]").split(",")]
    if any(not 0 <= b < depth for b in blocks):
        raise UserError(f"blocks={args['blocks']}", f"the model has blocks 0..{depth - 1}", "pass blocks=all or 0,1")
    out = Path(args["out"])
    if not hasattr(model, "grid_for"):  # a sequence model: the 1D pictures of its encoding, no images
        return write_sequence_pictures(model, tuple(blocks), out)
    img_size = model.patch_size * model.pos.train_grid[0]
    images, source = load_images(cfg, int(args["n_images"]), int(args["seed"]))
    if images.shape[-1] != img_size:
        images = torch.nn.functional.interpolate(images, size=(img_size, img_size), mode="bicubic")
    print(f"encoding {model.pos.name}; attention drawn on {source}")
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
    from vitpos.cli import run_main

    run_main(main)  # a user error (bad option, unsafe or corrupt checkpoint): one line, exit 2
