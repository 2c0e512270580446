"""A task module's config made whole: the typed keys a saved or hand-written config lacks, filled in one place.

An older checkpoint's config lacks later keys, and a module built in code may give only the keys it changes;
filled here, the task modules read every key as it stands, with no literal default beside the code:

- ``data``: its data set's defaults (:mod:`vitpos.config.data`; a config without ``data.name``: the task's first
  data set, CIFAR-10 or the copy task, as the data modules take it).
- ``model``: ``compile`` off (eager, as a config without the key ran); its other keys are the network's
  arguments, whose defaults are the network's own.
- ``optim``: the schema's defaults (:class:`vitpos.config.optim.AdamW`); a composed run always has every key.
- ``task`` of an image classifier: what a config without the key trained with (:data:`IMAGE_TASK_BEFORE`), which
  is not always today's recipe: a checkpoint saved before the EMA existed has no EMA weights to load.
"""

from __future__ import annotations

from vitpos.config import SCHEMAS, defaults
from vitpos.config.optim import AdamW
from vitpos.config.task import ClassificationTask

#: an image classifier's task options at the value a config without them trained with (no EMA, no mixing,
#: plain cross-entropy, no flip test); ``name`` and the pictures at the schema's defaults
IMAGE_TASK_BEFORE = {
    "name": ClassificationTask.name,
    "label_smoothing": 0.0,
    "mixup": 0.0,
    "cutmix": 0.0,
    "ema_decay": 0.0,
    "ema_warmup": True,
    "flip_tta": False,
    "pictures": ClassificationTask.pictures,
    "pictures_every_n_epochs": ClassificationTask.pictures_every_n_epochs,
}


#: the data set a module config without ``data.name`` describes, per task (image or not)
FIRST_DATA_SET = {True: "cifar10", False: "seq_copy"}


def complete(cfg: dict, image: bool) -> dict:
    """A copy of the plain ``cfg`` filled in as the module docstring says (``task`` only for an ``image`` run); a
    data set with no schema (the config check refuses it) keeps its own keys."""
    data = cfg.get("data") or {}
    schema = SCHEMAS.get(("data", str(data.get("name") or FIRST_DATA_SET[image])))
    optim = {**defaults(AdamW), **(cfg.get("optim") or {})}
    model = {"compile": False, **(cfg.get("model") or {})}
    out = {**cfg, "data": {**(defaults(schema) if schema else {}), **data}, "model": model, "optim": optim}
    if image:
        out["task"] = {**IMAGE_TASK_BEFORE, **(cfg.get("task") or {})}
    return out
