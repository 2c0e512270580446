"""``python -m vitpos.viz``: write every picture of a model as PNG files.

The options and the ``--help`` text are :class:`VizOptions`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.image
import torch

from vitpos.cli.console import run_main
from vitpos.cli.options import option, parse_options
from vitpos.errors import UserError
from vitpos.run.checkpoint import newest_checkpoint
from vitpos.sizes import as_hw
from vitpos.tasks.build import from_checkpoint, load_plugin

from .attention import attention_distance_data
from .pictures import pictures_for
from .render import depth_of, patch_of

#: what viz writes into out=: one <tag>.png per picture (tags pos/..., attn/...) and the distance table
WRITTEN = ("pos_*.png", "attn_*.png", "attn_distance.csv")


@dataclass
class VizOptions:
    """Write every picture of a model as PNG files: its positional encoding (position similarity,
    RoPE logit vs offset, attention bias vs offset), attention maps and the mean attention
    distance per block and head (attn_distance.csv).

    ckpt= is a checkpoint written by train.py, image (model=timm too) or sequence: a .ckpt
    file, or a run folder, whose report's checkpoint is drawn (the best by val/acc, as the run
    chose) and printed. A glob pattern is expanded by the tool itself (bash does not expand
    patterns inside key=value); a pattern that matches nothing is refused, and when ckpt=
    matches several checkpoints the newest is drawn and the others are listed. Checkpoints are loaded with
    weights_only=True: a file that needs arbitrary Python objects is refused. Image
    checkpoints get their pictures on their patch grid, with attention drawn on test images of
    the checkpoint's data when they can be loaded (data_root= overrides its data.root), else
    on random images, and the run says which. Sequence checkpoints get the 1D pictures of
    their encoding on the training length. With encoding= instead of ckpt=, a freshly
    initialized ViT of that encoding is drawn (img_size=, patch_size=, dim=, depth=,
    num_heads=, pool= shape it). The pictures of an earlier viz run in out= (pos_*.png,
    attn_*.png, attn_distance.csv) are removed first, and the run says so.

    Examples:
      python -m vitpos.viz ckpt=runs/shapes/vit_cpu/sincos_2d-*/seed0 out=viz/shapes   # a run folder
      python -m vitpos.viz encoding=rope_2d_mixed out=viz/
    """

    ckpt: str | None = option(
        None, "the checkpoint to draw: a .ckpt file, a run folder (its report's) or a glob pattern", metavar="PATH"
    )
    encoding: str | None = option(None, "or: an encoding to draw on a freshly initialized ViT", metavar="NAME")
    module: str | None = option(
        None,
        "the plug-in encoding's .py file or module the run trained with "
        "(its encoding.module=); never loaded from the checkpoint",
        metavar="FILE|MODULE",
    )
    allow_changed_code: bool = option(
        False, "use a plug-in whose source changed since the run trained (refused by default: its digest differs)"
    )
    out: str = option("viz", "the folder for the pictures", metavar="DIR")
    n_images: int = option(4, "images in the attention maps")
    blocks: Any = option("all", "blocks shown by the RoPE and bias pictures: all, or a list", metavar="all|[INT,...]",
                         example="[0,5]")  # fmt: skip
    seed: int = option(0, "seed of the random images and of a fresh model")
    data_root: str | None = option(None, "where the test images are", metavar="DIR",
                                   default_text="the checkpoint's data.root")  # fmt: skip
    img_size: Any = option(32, "fresh model: image size in pixels, a side or [h,w]", metavar="INT|[H,W]",
                           example="[16,32]")  # fmt: skip
    patch_size: int = option(4, "fresh model: patch size in pixels")
    dim: int = option(192, "fresh model: width")
    depth: int = option(6, "fresh model: blocks")
    num_heads: int = option(3, "fresh model: attention heads")
    pool: str = option("gap", "fresh model: pooling", choices=["gap", "cls"])


def parse_args(argv: list[str] | None) -> VizOptions:
    args = parse_options(
        argv, VizOptions, prog="python -m vitpos.viz", usage="ckpt=PATH | encoding=NAME [key=value ...]"
    )
    if (args.ckpt is None) == (args.encoding is None):
        raise UserError("ckpt/encoding", "give exactly one of ckpt=PATH or encoding=NAME", "--help for the usage")
    load_plugin(args.module, args.allow_changed_code)
    if args.ckpt is not None:
        args.ckpt = str(newest_checkpoint(args.ckpt, "drawing"))
    return args


def clear_pictures(out: Path) -> None:
    """Remove what an earlier viz run wrote into ``out`` (only the names viz writes), so that no picture
    of another model is left next to the new ones."""
    old = sorted({p for pattern in WRITTEN for p in out.glob(pattern) if p.is_file()}) if out.is_dir() else []
    for p in old:
        p.unlink()
    if old:
        print(f"removed {len(old)} file(s) of an earlier viz run from {out}: {', '.join(p.name for p in old)}")


def load_model(args: VizOptions) -> tuple[torch.nn.Module, dict]:
    """The model (a VisionTransformer or a SequenceTransformer), and the config it
    was trained with ({} for a fresh model)."""
    if args.ckpt is None:
        from vitpos.models import VisionTransformer

        keys = ("img_size", "patch_size", "dim", "depth", "num_heads")
        as_hw(args.img_size, "img_size")  # a malformed size names this tool's option
        try:
            model = VisionTransformer(args.encoding, pool=args.pool, **{k: getattr(args, k) for k in keys})
        except (KeyError, TypeError, ValueError) as err:  # unknown name, options or geometry: the user's input
            raise UserError(f"encoding={args.encoding}", str(err.args[0] if err.args else err)) from None
        return model, {}
    module, _, cfg = from_checkpoint(args.ckpt)  # weights_only=True; CheckpointError names the file
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
    h, w = as_hw(data.get("img_size", 32), "data.img_size")
    return torch.randn(n, 3, h, w, generator=gen), f"{n} random images, as {reason}"


def save_pictures(pictures: dict, out: Path) -> None:
    """One ``<tag>.png`` per picture (``pos/rope_logit`` -> ``pos_rope_logit.png``)."""
    out.mkdir(parents=True, exist_ok=True)
    for tag, img in pictures.items():
        path = out / f"{tag.replace('/', '_')}.png"
        matplotlib.image.imsave(path, img)
        print(f"wrote {path}")


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
    save_pictures(pictures, out)
    return 0


def block_list(blocks, depth: int) -> list[int]:
    """``blocks=all``, ``blocks=[0,5]`` (or ``0,5``, ``3``) -> block indices, each checked against ``depth``."""
    if blocks == "all":
        return list(range(depth))
    items = blocks if isinstance(blocks, list) else str(blocks).strip("()[]").split(",")
    try:
        chosen = [int(b) for b in items]
    except ValueError:
        chosen = []
    if not chosen or any(not 0 <= b < depth for b in chosen):
        raise UserError(f"blocks={blocks}", f"the model has blocks 0..{depth - 1}", "pass blocks=all or [0,1]")
    return chosen


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    model, cfg = load_model(args)
    if args.data_root is not None:
        cfg = {**cfg, "data": {**(cfg.get("data") or {}), "root": args.data_root}}
    model.eval()
    blocks = tuple(block_list(args.blocks, depth_of(model)))
    out = Path(args.out)
    clear_pictures(out)
    if not hasattr(model, "grid_for"):  # a sequence model: the 1D pictures of its encoding, no images
        return write_sequence_pictures(model, blocks, out)
    img_size = tuple(p * side for p, side in zip(patch_of(model), model.pos.train_grid))  # (h, w) of the training grid
    images, source = load_images(cfg, args.n_images, args.seed)
    if tuple(images.shape[-2:]) != img_size:
        images = torch.nn.functional.interpolate(images, size=img_size, mode="bicubic")
    print(f"encoding {model.pos.name}; attention drawn on {source}")
    save_pictures(pictures_for(model, images, blocks=blocks, n_images=len(images)), out)
    dist = attention_distance_data(model, images)  # (depth, H)
    lines = ["block," + ",".join(f"head{h}" for h in range(dist.shape[1]))]
    lines += [f"{b}," + ",".join(f"{d:.4f}" for d in row) for b, row in enumerate(dist)]
    (out / "attn_distance.csv").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'attn_distance.csv'} (mean attention distance in patches, per block and head)")
    return 0


if __name__ == "__main__":
    run_main(main)  # a user error (bad option, unsafe or corrupt checkpoint): one line, exit 2
