"""The tasks' options and defaults (``task=classification``, ``task=sequence``): one dataclass per task. A task's
YAML file is a recipe (``@package _global_``) that also sets the evaluation, the optimiser and the epochs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vitpos.config.rules import IMAGE, Flag, Int, Number, option

SMOOTHING = Number(0.1, below=1, task=IMAGE, help="label smoothing of the cross-entropy")
MIXUP = Number(0, fix="task.mixup=0 turns it off", task=IMAGE, help="mixup's Beta(a, a); 0: off")
CUTMIX = Number(0, fix="task.cutmix=0 turns it off", task=IMAGE, help="cutmix's Beta(a, a); 0: off")
EMA = Number(0.999, below=1, fix="e.g. task.ema_decay=0.999; 0 turns it off", task=IMAGE,
             help="decay of the tested weight average; 0: off")  # fmt: skip
FLIP_TTA = Flag(task=IMAGE, defines=False, help="also score with flip test-time augmentation")
PICTURES = Flag(defines=False, help="pictures of the encoding and attention in TensorBoard")
EVERY = Int(0, minimum=0, defines=False, help="pictures every n epochs; 0: at the end")


@dataclass
class ClassificationTask:
    """Image classification (:class:`vitpos.tasks.classification.ImageClassifier`), with the default recipe."""

    name: Any = "classification"
    label_smoothing: Any = option(0.1, rule=SMOOTHING)
    mixup: Any = option(0.0, rule=MIXUP)  # timm Mixup alpha; > 0 turns it on
    cutmix: Any = option(0.0, rule=CUTMIX)  # timm CutMix alpha; > 0 turns it on
    ema_decay: Any = option(0.999, rule=EMA)  # timm ModelEmaV3: scored; the raw weights logged as <stage>/acc_raw
    ema_warmup: Any = option(True, rule=Flag(task=IMAGE, help="ramp the EMA decay up over the first steps"))
    flip_tta: Any = option(True, rule=FLIP_TTA)  # with data.hflip: test/acc_flip (image and mirror averaged)
    pictures: Any = option(True, rule=PICTURES)  # log pictures of the encoding and attention to TensorBoard
    pictures_every_n_epochs: Any = option(0, rule=EVERY)  # 0: pictures only at the end of training


@dataclass
class SequenceTask:
    """Per-token classification on generated toy sequences (:class:`vitpos.tasks.sequence.SequenceTask`)."""

    name: Any = "sequence"
    pictures: Any = option(True, rule=PICTURES)  # pictures of the encoding (pos/...) in TensorBoard at the end
    pictures_every_n_epochs: Any = option(0, rule=EVERY)
