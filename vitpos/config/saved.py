"""A task module's config made whole: the typed keys a saved or hand-written config lacks (an older checkpoint's, a
module built in code), filled in one place, so the task modules read every key with no literal default of their own:
``data``: its data set's defaults (no ``data.name``: the task's first data set, as the data modules take it);
``model``: ``compile`` off (as a config without the key ran; the other keys default in the network); ``optim``: the
schema's defaults; an image classifier's ``task``: what a config without the key trained with
(:data:`IMAGE_TASK_BEFORE`), not always today's recipe (a checkpoint from before the EMA has no EMA weights).
"""

from __future__ import annotations

from vitpos.config import SCHEMAS, defaults
from vitpos.config.optim import AdamW
from vitpos.config.task import ClassificationTask

#: an image classifier's task options at the value a config without them trained with: no EMA, no mixing, plain
#: cross-entropy, no flip test (``name`` and the pictures at the schema's defaults)
IMAGE_TASK_BEFORE = {**defaults(ClassificationTask), "label_smoothing": 0.0, "mixup": 0.0, "cutmix": 0.0}
IMAGE_TASK_BEFORE.update(ema_decay=0.0, ema_warmup=True, flip_tta=False)
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
