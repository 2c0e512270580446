"""The tasks' options and defaults (``task=classification``, ``task=sequence``); a task's YAML file is a recipe
that also sets the evaluation, the optimiser and the epochs."""

from __future__ import annotations

from typing import Any

from vitpos.config.rules import IMAGE, Flag, Int, Number, option, schema

MIXUP = Number(0, fix="task.mixup=0 turns it off", task=IMAGE)
CUTMIX = Number(0, fix="task.cutmix=0 turns it off", task=IMAGE)
EMA = Number(0.999, below=1, fix="e.g. task.ema_decay=0.999; 0 turns it off", task=IMAGE)
PICTURES = Flag(defines=False, help="pictures of the encoding and attention in TensorBoard")
EVERY = Int(0, minimum=0, defines=False, help="pictures every n epochs; 0: at the end")


@schema("task", "classification")
class ClassificationTask:
    """Image classification (:class:`vitpos.tasks.classification.ImageClassifier`), with the default recipe."""

    name: Any = "classification"
    label_smoothing: Any = option(0.1, "label smoothing of the cross-entropy", Number(0.1, below=1, task=IMAGE))
    mixup: Any = option(0.0, "mixup's Beta(a, a); 0: off", MIXUP)
    cutmix: Any = option(0.0, "cutmix's Beta(a, a); 0: off", CUTMIX)
    ema_decay: Any = option(0.999, "decay of the tested weight average; 0: off", EMA)
    ema_warmup: Any = option(True, "ramp the EMA decay up over the first steps", Flag(task=IMAGE))
    flip_tta: Any = option(True, "also score with flip test-time augmentation", Flag(task=IMAGE, defines=False))
    pictures: Any = option(True, rule=PICTURES)
    pictures_every_n_epochs: Any = option(0, rule=EVERY)


@schema("task", "sequence")
class SequenceTask:
    """Per-token classification on generated toy sequences (:class:`vitpos.tasks.sequence.SequenceTask`)."""

    name: Any = "sequence"
    pictures: Any = option(True, rule=PICTURES)
    pictures_every_n_epochs: Any = option(0, rule=EVERY)
