"""From a composed config to what Lightning trains: ``build(cfg) -> (module, datamodule)``.

The one place that maps ``task.name`` to its LightningModule and data module,
used by training (``vitpos.train``) and by every tool that rebuilds a run from
its checkpoint (``vitpos.extrapolate``, ``vitpos.viz``).
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
from omegaconf import DictConfig, OmegaConf

from vitpos.data.images import ImageDataModule
from vitpos.data.sequence import SequenceDataModule
from vitpos.errors import CheckpointError, UserError
from vitpos.run.checkpoint import load_checkpoint, task_kind

from .classification import ImageClassifier
from .sequence import SequenceTask

TASKS = ("classification", "sequence")


def build(cfg: DictConfig | dict, pretrained: bool = True) -> tuple[L.LightningModule, L.LightningDataModule]:
    """(LightningModule, LightningDataModule) for ``cfg.task.name``.

    Each module saves the whole plain config, so tools rebuild the run from a
    checkpoint alone. Images: the batch order comes from the run's ``seed``
    (and the epoch); sequences: the data are fixed by ``data.seed``.
    ``pretrained``: load ``model.checkpoint`` (``model=timm``) into the new model;
    False where a vitpos checkpoint's weights replace them anyway."""
    plain = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    name = (plain.get("task") or {}).get("name")
    if name == "classification":
        data_opts = {k: v for k, v in plain["data"].items() if k != "num_classes"}
        datamodule = ImageDataModule(**data_opts, shuffle_seed=int(plain.get("seed", 0)))
        plain["data"]["num_classes"] = datamodule.num_classes
        return ImageClassifier(plain, pretrained), datamodule
    if name == "sequence":
        return SequenceTask(plain), SequenceDataModule(**plain["data"])
    raise UserError("task.name", f"unknown task {name!r}", f"valid: {', '.join(TASKS)} (task=...)")


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
    cfg = OmegaConf.create(saved)
    for key, value in (overrides or {}).items():
        OmegaConf.update(cfg, key, value)
    module, datamodule = build(cfg, pretrained=False)  # the checkpoint's weights, not model.checkpoint's
    try:
        module.load_state_dict(checkpoint["state_dict"])
    except RuntimeError as err:
        raise CheckpointError(f"ckpt={path}: its weights do not fit the model its config describes: {err}") from None
    return module, datamodule, OmegaConf.to_container(cfg, resolve=True)
