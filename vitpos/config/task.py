"""The tasks' options and defaults (``task=classification``, ``task=sequence``): one dataclass per task.

A task's YAML file is a recipe (``@package _global_``): besides the ``task`` section, which starts from the
schema here, it sets the evaluation, the optimiser and the epochs it trains with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class ClassificationTask:
    """Image classification (:class:`vitpos.tasks.classification.ImageClassifier`), with the default recipe."""

    name: Any = "classification"
    label_smoothing: Any = 0.1
    mixup: Any = 0.0  # timm Mixup alpha; > 0 turns it on
    cutmix: Any = 0.0  # timm CutMix alpha; > 0 turns it on
    ema_decay: Any = 0.999  # > 0: timm ModelEmaV3 of the weights; evaluation scores the average, and the raw
    #   weights are logged beside it as <stage>/acc_raw
    ema_warmup: Any = True  # ModelEmaV3's warmup: a smaller decay over the first steps (short runs)
    flip_tta: Any = True  # with data.hflip: also score the test set with flip test-time augmentation, as
    #   test/acc_flip (softmax of the image and its mirror averaged); test/acc stays the plain score
    pictures: Any = True  # log pictures of the encoding and attention to TensorBoard
    pictures_every_n_epochs: Any = 0  # 0: pictures only at the end of training


@dataclass
class SequenceTask:
    """Per-token classification on generated toy sequences (:class:`vitpos.tasks.sequence.SequenceTask`)."""

    name: Any = "sequence"
    pictures: Any = True  # pictures of the encoding (pos/...) in TensorBoard at the end of training
    pictures_every_n_epochs: Any = 0
