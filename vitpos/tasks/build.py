"""From a composed config to what Lightning trains: ``build(cfg) -> (module, datamodule)``.

The one place that maps ``task.name`` to its LightningModule and data module,
used by training (``vitpos.train``) and by every tool that rebuilds a run from
its checkpoint (``vitpos.extrapolate``, ``vitpos.viz``).
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
from omegaconf import DictConfig, OmegaConf

from vitpos.checks.options import check_task
from vitpos.data import make_datamodule
from vitpos.encodings import get_encoding_class
from vitpos.encodings.plugins import is_missing, load_module
from vitpos.errors import CheckpointError, UserError
from vitpos.run.checkpoint import load_checkpoint, task_kind
from vitpos.run.identity import plugin_source

from .classification import ImageClassifier
from .sequence import SequenceTask


def build(cfg: DictConfig | dict, pretrained: bool = True) -> tuple[L.LightningModule, L.LightningDataModule]:
    """(LightningModule, LightningDataModule) for ``cfg.task.name``.

    Each module saves the whole plain config, so tools rebuild the run from a
    checkpoint alone. Images: the batch order comes from the run's ``seed``
    (and the epoch); sequences: the data are fixed by ``data.seed``.
    ``pretrained``: load ``model.checkpoint`` (``model=timm``) into the new model;
    False where a vitpos checkpoint's weights replace them anyway."""
    plain = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    image = check_task(plain.get("task"))  # the one rule of task.name (vitpos/checks/options.py)
    datamodule = make_datamodule(plain["data"], image, int(plain.get("seed", 0)))
    if image:
        plain["data"]["num_classes"] = datamodule.num_classes
        return ImageClassifier(plain, pretrained), datamodule
    return SequenceTask(plain), datamodule


#: what the tool's command named (:func:`load_plugin`), for :func:`same_code`: one command per process
_NAMED: dict = {"module": None, "allow_changed_code": False}


def load_plugin(module: str | None, allow_changed_code: bool = False) -> None:
    """Import the plug-in encoding a tool's ``module=`` names (the file or module its run was
    trained with: ``encoding.module=``); a tool never loads one from a path inside a checkpoint.
    ``allow_changed_code``: the tool's option to use a plug-in whose source changed since training
    (:func:`same_code`)."""
    _NAMED.update(module=module or None, allow_changed_code=bool(allow_changed_code))
    if not module:
        return
    try:
        load_module(module)
    except Exception as err:  # not found, or the plug-in's own code failed: one line either way
        if is_missing(err, module):
            raise UserError("module", str(err), "give the .py file or module the run trained with") from None
        what = " ".join(str(err).split()) or type(err).__name__
        raise UserError("module", f"{module} failed to import: {type(err).__name__}: {what}",
                        "fix the plug-in (or install what it imports), then run again") from None  # fmt: skip


def needs_plugin(path, saved: dict) -> None:
    """Refuse, in one line, a checkpoint whose encoding is not registered here (a plug-in not loaded)."""
    encoding = saved.get("encoding") or {}
    try:
        get_encoding_class(str(encoding.get("name")))
    except KeyError:
        module = encoding.get("module")
        fix = f"pass module={module}" if module else "install the package that provides it"
        raise CheckpointError(
            f"ckpt={path}: trained with the plug-in encoding {encoding.get('name')!r}, which is not loaded "
            f"(code is never loaded from a checkpoint): {fix}"
        ) from None


def same_code(path, saved: dict) -> None:
    """Refuse, in one line, a checkpoint whose plug-in encoding's source digest (``run.encoding_source``,
    recorded at training) differs from the digest of the code loaded now (the tool's ``module=``, else
    the registered class's module: :func:`vitpos.run.identity.plugin_source`), unless the command says
    ``allow_changed_code=true``: edited code would be evaluated as if it were the trained one."""
    recorded = (saved.get("run") or {}).get("encoding_source")
    if not recorded or _NAMED["allow_changed_code"]:
        return
    encoding = {k: v for k, v in (saved.get("encoding") or {}).items() if k != "module"}
    if _NAMED["module"]:
        encoding["module"] = _NAMED["module"]
    now = plugin_source(encoding)
    if now is not None and now != recorded:
        given = f"module={_NAMED['module']}" if _NAMED["module"] else "the installed plug-in"
        raise CheckpointError(
            f"ckpt={path}: the plug-in encoding {encoding.get('name')!r} trained with source digest {recorded}, "
            f"{given} has {now} now (its code changed since): give the code it trained with, or "
            "allow_changed_code=true to use today's"
        )


def from_checkpoint(path: str | Path, overrides: dict | None = None):
    """(module with the checkpoint's weights, its datamodule, the run's config) from a
    vitpos checkpoint, loaded with ``weights_only=True`` (never runs code from the file).

    ``overrides``: dotted keys (``{"data.root": "elsewhere"}``) applied to the saved config.
    Raises :class:`vitpos.errors.CheckpointError` for a file that is not a vitpos
    checkpoint or whose weights do not fit the model its config describes."""
    checkpoint = load_checkpoint(path)
    saved = dict(checkpoint["hyper_parameters"]["cfg"])
    if not (saved.get("task") or {}).get("name"):  # checkpoints that saved only model/encoding/optim/data
        name = "sequence" if task_kind(saved) == "len" else "classification"
        saved["task"] = {**(saved.get("task") or {}), "name": name}
    needs_plugin(path, saved)
    same_code(path, saved)
    cfg = OmegaConf.create(saved)
    for key, value in (overrides or {}).items():
        OmegaConf.update(cfg, key, value)
    module, datamodule = build(cfg, pretrained=False)  # the checkpoint's weights, not model.checkpoint's
    try:
        module.load_state_dict(checkpoint["state_dict"])
    except RuntimeError as err:
        raise CheckpointError(f"ckpt={path}: its weights do not fit the model its config describes: {err}") from None
    return module, datamodule, OmegaConf.to_container(cfg, resolve=True)
