"""The timm model of ``python train.py model=timm``, and the weights of a timm checkpoint file for it.

One owner for three rules that the config check (``vitpos/checks/model.py``, before anything
is written) and the task (``vitpos/tasks/classification.py``, when it builds the model) share:

- which model ``model.name`` and ``model.kwargs`` make (:func:`create_vit`): a timm
  ``VisionTransformer`` that :func:`vitpos.integrations.timm.apply_encoding` can convert, for the
  data's classes and image size, never downloaded (``pretrained=False``);
- which keys of the file ``model.checkpoint`` apply (:func:`plan_checkpoint`): a key of another
  shape is refused, except the head (another class count: left at its initialisation) and
  ``pos_embed`` (another grid: resampled by the encoding); keys that do not apply are listed in
  one line (:meth:`CheckpointPlan.line`), never dropped silently;
- the geometry the other checks read (:func:`geometry`): patch size, width, heads, depth and
  prefix tokens come from the timm model itself, not from the config.

The config check of ``model=timm`` is here too: :func:`timm_geometry`, then :func:`check_timm`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import timm
import torch
from timm.models import clean_state_dict, load_state_dict
from torch import nn

from vitpos.encodings import EncodingContext, create_encoding
from vitpos.errors import UserError
from vitpos.safe_load import NotLoadable, load_weights_only
from vitpos.sizes import as_hw, patch_grid

from .timm import carries_table, conversion_problem, table_grid

#: what to pass as ``model.checkpoint`` instead of a file that cannot be read
SAVE_FIX = "pass a state dict saved with torch.save(model.state_dict(), PATH), or a .safetensors file"
#: create_model arguments vitpos sets itself: from the data (classes, size), or never (downloads)
SET_BY_VITPOS = ("pretrained", "num_classes", "img_size", "pretrained_cfg", "pretrained_cfg_overlay", "checkpoint_path")


def create_vit(model_cfg: Mapping, num_classes: int, img_size, device: str | torch.device = "cpu") -> nn.Module:
    """``timm.create_model(model.name, pretrained=False, num_classes=..., img_size=..., **model.kwargs)``,
    refused with a :class:`UserError` naming ``model.name`` or ``model.kwargs`` when it is not a
    timm ViT that ``apply_encoding`` converts. ``img_size``: ``data.img_size``, anything
    :func:`vitpos.sizes.as_hw` takes (a side, or an ``[h, w]`` list, tuple or Hydra ListConfig),
    passed to timm as ``(h, w)``; None: the model's default. ``device="meta"``: shapes only, no
    memory (the config check)."""
    name, kwargs = str(model_cfg["name"]), dict(model_cfg.get("kwargs") or {})
    clash = sorted(set(kwargs) & set(SET_BY_VITPOS))
    if clash:
        raise UserError(f"model.kwargs.{clash[0]}", "is set by vitpos", "num_classes and img_size come from data.*")
    if not timm.is_model(name):
        raise UserError("model.name", f"{name!r} is not a timm model", "e.g. model.name=vit_tiny_patch16_224")
    size = {} if img_size is None else {"img_size": as_hw(img_size, "data.img_size")}  # {}: the model's default
    try:
        with torch.device("meta"):  # what class the name makes, before passing it an image size
            probe = timm.create_model(name, pretrained=False, num_classes=num_classes, **without_size(kwargs))
        problem = conversion_problem(probe)
        if problem is not None:
            what, kwarg = problem
            other = "another model.name, e.g. vit_tiny_patch16_224 (timm.list_models('vit_*'))"
            raise UserError("model.name", f"{name}: {what}", f"model.kwargs.{kwarg}, or {other}" if kwarg else other)
        with torch.device(device):
            return timm.create_model(name, pretrained=False, num_classes=num_classes, **size, **kwargs)
    except (TypeError, ValueError, AssertionError) as err:
        if isinstance(err, UserError):
            raise
        raise UserError("model.kwargs", f"timm.create_model({name!r}) refused them: {err}", "see timm's docs") from None


def without_size(kwargs: dict) -> dict:
    """``kwargs`` without the ones only a ViT takes (the probe may make any model)."""
    return {k: v for k, v in kwargs.items() if k not in ("img_size", "dynamic_img_size", "dynamic_img_pad")}


def geometry(model: nn.Module) -> dict:
    """What the size, memory and encoding checks read from a model config, from a timm ViT:
    ``patch_size`` (square patches), ``dim``, ``num_heads``, ``depth``, ``num_prefix_tokens``."""
    ph, pw = model.patch_embed.patch_size
    if ph != pw:
        raise UserError("model.kwargs.patch_size", f"{ph}x{pw} patches are not square", "use square patches")
    heads = model.blocks[0].attn.num_heads
    depth, prefix = len(model.blocks), model.num_prefix_tokens
    return {"patch_size": ph, "dim": model.embed_dim, "num_heads": heads, "depth": depth, "num_prefix_tokens": prefix}


def timm_geometry(c: dict) -> dict:
    """The config check's ``c["model"]`` with the timm model's :func:`geometry` filled in (built on ``meta``:
    shapes, no memory); a :class:`UserError` for a model vitpos cannot convert."""
    m = c["model"]
    if not isinstance(m.get("name"), str) or not m["name"]:
        raise UserError(
            "model.name", f"must name a timm model, got {m.get('name')!r}", "model.name=vit_tiny_patch16_224"
        )
    if not isinstance(m.get("kwargs") or {}, dict):
        raise UserError("model.kwargs", f"must be a mapping, got {m.get('kwargs')!r}", "model.kwargs={depth:6}")
    return {**m, **geometry(create_vit(m, int(c["data"].get("num_classes") or 1), None, device="meta"))}


def check_timm(c: dict, name: str, options: dict):
    """The config check of ``model=timm`` (``c["model"]`` holding its :func:`timm_geometry`): ``model.checkpoint``
    (null: timm's initialisation) a readable state dict whose keys fit the model made for this data
    (:func:`plan_checkpoint`, the rule the task loads it with), then the encoding ``name`` built on the model's
    geometry for the training grid. Returns the encoding module, whose hooks the caller runs there."""
    m, data = c["model"], c["data"]
    if m.get("checkpoint") is not None:
        state = read_checkpoint(m["checkpoint"])
        model = create_vit(m, int(data.get("num_classes") or 1), data["img_size"], device="meta")
        plan_checkpoint(model, state, name, m["checkpoint"])
    grid = patch_grid(data["img_size"], m["patch_size"], "data.img_size")
    ctx = EncodingContext(m["dim"], m["num_heads"], m["depth"], grid, int(m.get("num_prefix_tokens", 0)))
    return create_encoding(name, ctx, **options)


def read_checkpoint(path) -> dict[str, torch.Tensor]:
    """The state dict in the file ``model.checkpoint``: a ``.safetensors`` file by timm's reader,
    any other by :func:`vitpos.safe_load.load_weights_only` (``weights_only=True``: a crafted file
    is refused, not run; a file that is no PyTorch checkpoint is named as what it is), then the
    weights as timm's ``load_state_dict`` picks them (:func:`timm_state`)."""
    file = Path(str(path)).expanduser()
    if not file.is_file():
        raise UserError("model.checkpoint", f"{file} is not a file", "the path of a timm state_dict (torch.save)")
    if file.name.endswith(".safetensors"):
        try:
            state = load_state_dict(str(file))
        except Exception as err:  # a torn header, another format: the file is the problem, whatever the type
            raise UserError("model.checkpoint", f"{file} cannot be read as safetensors: {err}", SAVE_FIX) from None
    else:
        try:
            state = timm_state(load_weights_only(file))
        except NotLoadable as err:
            fix = f"{SAVE_FIX}; do NOT load this one with weights_only=False: that would run its code"
            raise UserError("model.checkpoint", f"{file}: {err}", fix if err.crafted else SAVE_FIX) from None
    if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
        raise UserError("model.checkpoint", f"{file} holds no state dict of tensors", SAVE_FIX)
    return state


def timm_state(checkpoint):
    """The weights in a loaded checkpoint as timm's ``load_state_dict`` takes them: its EMA weights
    (``state_dict_ema``, ``model_ema``) where it has them, else ``state_dict`` or ``model``, else
    the checkpoint itself; wrapper prefixes (``module.``, ``_orig_mod.``) removed. Anything but a
    dict is given back as it is (:func:`read_checkpoint` refuses it)."""
    if not isinstance(checkpoint, dict):
        return checkpoint
    key = next((k for k in ("state_dict_ema", "model_ema") if checkpoint.get(k) is not None), None)
    key = key or next((k for k in ("state_dict", "model") if k in checkpoint), None)
    state = checkpoint[key] if key else checkpoint
    return clean_state_dict(state) if isinstance(state, dict) else state


@dataclass
class CheckpointPlan:
    """What loading a checkpoint into a timm model does: ``load`` (key -> tensor), the keys
    ``skipped`` with the reason, and the model's keys ``missing`` from the file."""

    path: str
    load: dict[str, torch.Tensor] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def line(self) -> str:
        """The one printed line: what was loaded, and every key that was not."""
        skipped = ", ".join(f"{k} ({why})" for k, why in self.skipped.items()) or "none"
        missing = ", ".join(self.missing) or "none"
        return (
            f"model.checkpoint={self.path}: loaded {len(self.load)} tensors; skipped: {skipped}; "
            f"not in the file (left at their initialisation): {missing}"
        )


def plan_checkpoint(model: nn.Module, state: dict, encoding: str, path) -> CheckpointPlan:
    """Which keys of ``state`` load into the (unconverted) timm ``model`` that the encoding
    ``encoding`` will convert. A :class:`UserError` naming ``model.checkpoint`` for a key whose
    shape does not fit, or a file none of whose keys is a weight of the model."""
    own = model.state_dict()
    plan = CheckpointPlan(str(path))
    for key, value in state.items():
        if key not in own:
            plan.skipped[key] = "not a weight of this model"
        elif key.startswith("head.") and value.shape != own[key].shape:
            plan.skipped[key] = f"{value.shape[0]} classes in the file, {own[key].shape[0]} here"
        elif key == "pos_embed" and not carries_table(encoding):
            plan.skipped[key] = f"encoding {encoding} has no position table"
        elif key == "pos_embed" and value.shape[-1] == own[key].shape[-1] and value.dim() == 3:
            prefix = 0 if model.no_embed_class else model.num_prefix_tokens
            try:
                table_grid(model, value.shape[1] - prefix)  # another grid: resampled by the encoding
            except UserError as err:
                raise UserError("model.checkpoint", f"{path}: pos_embed: {err.what}", "a square table") from None
            plan.load[key] = value
        elif value.shape != own[key].shape:
            raise UserError(
                "model.checkpoint",
                f"{path}: {key} has the shape {tuple(value.shape)} in the file, {tuple(own[key].shape)} in this model",
                "a checkpoint of the same architecture (model.name, model.kwargs), or model.checkpoint=null",
            )
        else:
            plan.load[key] = value
    plan.missing = sorted(set(own) - set(state))
    if not plan.load:
        raise UserError("model.checkpoint", f"{path}: none of its keys is a weight of this model", "check model.name")
    return plan


def load_planned(model: nn.Module, plan: CheckpointPlan) -> None:
    """Copy ``plan.load`` into ``model``; a ``pos_embed`` of another grid replaces the model's
    table as it is (``apply_encoding`` resamples it by the encoding's rule)."""
    load = dict(plan.load)
    pos = load.pop("pos_embed", None)
    if pos is not None:
        model.pos_embed = nn.Parameter(pos.to(model.pos_embed.dtype).clone())
    model.load_state_dict(load, strict=False)
