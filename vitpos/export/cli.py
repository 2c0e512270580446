"""``python -m vitpos.export``: a trained image checkpoint as an ONNX or ``torch.export`` file.

The options and the ``--help`` text are :class:`ExportOptions`. Every input is checked before
anything is exported (the output name and whether a file can be created there, the checkpoint, its
task, the strategy and the packages ONNX needs), and the file is written only once its graph agrees
with the eager model, atomically: bad input, a model no range exports, or a write the disk refuses
at the end leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import errno
import io
import itertools
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from vitpos.cli.options import option, parse_options
from vitpos.errors import UserError
from vitpos.files import WriteError, atomic_path, cause
from vitpos.run.checkpoint import newest_checkpoint, task_kind
from vitpos.sizes import as_hw
from vitpos.tasks.build import from_checkpoint, load_plugin

from .graph import FORMATS, TOLERANCE, Exported, ExportFailed, export_model, geometry_of

SUFFIX = {"onnx": ".onnx", "torch_export": ".pt2"}
ONNX_PACKAGES = ("onnx", "onnxscript", "onnxruntime")


@dataclass
class ExportOptions:
    """Export a trained image model (a checkpoint of task=classification) to ONNX or to a
    torch.export program, with dynamic batch, height and width where its encoding allows it.

    Three size ranges are tried, broadest first: any size (sides that are multiples of the patch,
    two patches or more), sizes from the training size up, and the training size alone (only the
    batch dynamic). The first whose graph runs at its sizes and agrees with the eager model there
    (|difference| <= 1e-4 on the logits, checked with onnxruntime for ONNX) is written; the tool
    prints the range, why each broader one failed, and the largest difference at every size it
    checked. ckpt= is a .ckpt file, a run folder (the checkpoint its report scored: the best by
    val/acc, as the run chose) or a glob pattern (of several, the newest); the file used is printed. The
    file is written only after the check passes; bad input writes nothing. ONNX needs the packages
    onnx, onnxscript and onnxruntime (pip install -e ".[export]"). docs/export.md has the table
    of every encoding.

    Examples:
      python -m vitpos.export ckpt=runs/shapes/vit_cpu/sincos_2d-*/seed0/checkpoints/last.ckpt out=export/sincos_2d.onnx
      python -m vitpos.export ckpt=runs/shapes/vit_cpu/sincos_2d-*/seed0 format=torch_export out=export/sincos_2d.pt2
    """

    ckpt: str = option(help="a .ckpt file, a run folder (its report's checkpoint) or a glob pattern", metavar="PATH",
                       example="runs/.../checkpoints/last.ckpt")  # fmt: skip
    out: str | None = option(None, "the file to write", metavar="FILE",
                             default_text="model.onnx, or model.pt2 for format=torch_export")  # fmt: skip
    format: str = option("onnx", "onnx (checked with onnxruntime) or torch_export (torch.export.save)",
                         choices=list(FORMATS))  # fmt: skip
    strategy: str | None = option(None, "the encoding's strategy for sizes other than the training size",
                                  metavar="NAME", default_text="the run's own")  # fmt: skip
    module: str | None = option(
        None,
        "the plug-in encoding's .py file or module the run trained with "
        "(its encoding.module=); never loaded from the checkpoint",
        metavar="FILE|MODULE",
    )
    allow_changed_code: bool = option(
        False, "use a plug-in whose source changed since the run trained (refused by default: its digest differs)"
    )


def check_options(opts: ExportOptions) -> Path:
    """The output path, after refusing what cannot work: a folder, a name whose suffix is another
    format's, a place no file can be created (:func:`check_writable`), a missing package."""
    suffix = SUFFIX[opts.format]
    out = Path(opts.out or f"model{suffix}")
    if out.is_dir():
        raise UserError(f"out={out}", "is a folder", f"name the file, e.g. out={out / ('model' + suffix)}")
    if out.suffix != suffix:
        other = next((f for f, s in SUFFIX.items() if s == out.suffix), None)
        fix = f"or pass format={other}" if other else f"e.g. out={out.with_suffix(suffix)}"
        raise UserError(f"out={out}", f"format={opts.format} writes a {suffix} file",
                        f"name it {out.with_suffix(suffix).name}, {fix}")  # fmt: skip
    check_writable(out)
    if opts.format == "onnx":
        import importlib.util

        missing = [name for name in ONNX_PACKAGES if importlib.util.find_spec(name) is None]
        if missing:
            raise UserError("format=onnx", f"needs the packages {', '.join(missing)}",
                            'pip install -e ".[export]", or pass format=torch_export')  # fmt: skip
    return out


def check_writable(out: Path) -> None:
    """Refuse an ``out=`` where no file can be created, before the checkpoint is loaded: an export
    takes up to a minute, and its file is written last. The nearest existing folder of ``out`` (its
    own, or the one its missing folders would be made in) must be a folder in which a file can be
    created: tried for real, with a temporary file that is gone when closed (nameless where the
    system allows), since ``os.access`` answers from the permission bits, which root passes where
    the file system still refuses (a folder of ``/proc``, an immutable folder, root squashed on
    NFS). Nothing is written: the missing folders of ``out`` are made only with the file."""
    folder = out.absolute().parent
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not existing.is_dir():
        raise UserError(f"out={out}", f"{existing} is a file, not a folder",
                        f"pass a path in a folder, e.g. out={existing.parent / out.name}")  # fmt: skip
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        raise UserError(f"out={out}", f"no file can be created in {existing} ({cause(err)})",
                        f"pass out=<a folder you can write>/{out.name}") from None  # fmt: skip


def load_image_model(path: Path, strategy: str | None) -> tuple[torch.nn.Module, dict]:
    """(the evaluated model, the run's config) of an image checkpoint; a sequence checkpoint, or a
    ``strategy`` its encoding does not know, is refused (:func:`main` exports under that strategy)."""
    module, _, cfg = from_checkpoint(path)
    if task_kind(cfg) != "res":
        raise UserError(f"ckpt={path}", "is a sequence-task checkpoint (task=sequence)",
                        "export takes image models: a checkpoint of task=classification")  # fmt: skip
    model = module.eval_model
    if strategy is not None:
        encoding = getattr(module, "encoding", None)  # None: a model without a vitpos encoding
        if encoding is None:
            raise UserError(f"strategy={strategy}", "this model has no vitpos encoding to set a strategy of")
        if strategy not in encoding.valid_strategies():
            raise UserError(f"strategy={strategy}", f"not a strategy of the encoding {encoding.name}",
                            f"valid: {', '.join(encoding.valid_strategies())}")  # fmt: skip
    return model.eval(), cfg


#: errno -> the fix for a write of ``out=`` the disk refused after the export (what happened: DISK_ERRORS)
LATE_FIXES = {
    errno.ENOSPC: "free space on that disk or pass out= on another one, then run the command again",
    errno.EDQUOT: "free space or raise the quota, or pass out= on another disk, then run the command again",
    errno.EFBIG: "raise it: ulimit -f unlimited, then run the command again",
}


def write(result: Exported, out: Path) -> None:
    """The exported graph at ``out``, atomically (a temporary file renamed over it); a write the
    disk refuses (no space, ``ulimit -f``) leaves nothing, not even the folders made for the file,
    and is a :class:`UserError` naming ``out=``."""
    data = result.artifact
    if result.format == "torch_export":
        buffer = io.BytesIO()  # torch.export.save wants a name ending in .pt2, or a buffer
        torch.export.save(result.artifact, buffer)
        data = buffer.getvalue()
    made = list(itertools.takewhile(lambda p: not p.exists(), out.absolute().parents))  # deepest first
    try:
        with atomic_path(out) as tmp:
            tmp.write_bytes(data)
    except WriteError as err:  # atomic_path removed its temporary file; the folders made for it go too
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()
        fix = LATE_FIXES.get(err.errno, f"pass out=<a folder you can write>/{out.name}")
        raise UserError(
            f"out={out}", f"cannot be written after the export: {cause(err)}; nothing written", fix
        ) from None


def report(result: Exported, out: Path, geo) -> list[str]:
    """What the tool prints after writing: the range, the reasons, the check."""
    (h, w), (ph, pw) = geo.train, geo.patch
    if result.scope == "any size":
        sizes = f"any height and width that are multiples of {ph}x{pw}, from {2 * ph}x{2 * pw}"
    elif result.scope == "from the training size up":
        sizes = f"heights and widths that are multiples of {ph}x{pw}, from the training size {h}x{w} up"
    else:
        sizes = f"the training size {h}x{w} only (fixed size)"
    lines = [f"wrote {out}: dynamic batch; {sizes}"]
    lines += [f"  why not {reason}" for reason in result.reasons]
    checked = ", ".join(f"{d:.1g} at {s[0]}x{s[1]}" for s, d in result.diffs.items())
    engine = "onnxruntime" if result.format == "onnx" else "the exported program"
    lines.append(f"checked ({engine} vs PyTorch eager, max |diff| of the logits, <= {TOLERANCE:g}): {checked}")
    return lines


def main(argv: list[str] | None = None) -> int:
    opts = parse_options(argv, ExportOptions, prog="python -m vitpos.export", usage="ckpt=PATH [key=value ...]")
    out = check_options(opts)
    load_plugin(opts.module, opts.allow_changed_code)
    path = newest_checkpoint(opts.ckpt, "exporting")
    model, cfg = load_image_model(path, opts.strategy)
    encoding = getattr(model, "pos", None)
    with encoding.using_strategy(opts.strategy) if opts.strategy is not None else contextlib.nullcontext():
        return export_checked(model, encoding, cfg, path, opts.format, out)


def export_checked(model: torch.nn.Module, encoding, cfg: dict, path: Path, form: str, out: Path) -> int:
    """Export ``model`` (from the checkpoint ``path``, its run's config ``cfg``, its vitpos encoding
    or None) to the format ``form``, write it at ``out`` and print what was written; 1 when no size
    range exports."""
    geo = geometry_of(model, as_hw(cfg["data"]["img_size"], "data.img_size"))
    about = f"{encoding.name}, strategy {encoding.strategy}, " if encoding is not None else ""
    print(f"exporting {path} ({about}trained at {geo.train[0]}x{geo.train[1]}) to {form}")
    try:
        result = export_model(model, geo, form)
    except ExportFailed as err:
        print(f"error: {err}; nothing written", file=sys.stderr)
        return 1
    write(result, out)
    print("\n".join(report(result, out, geo)))
    return 0
