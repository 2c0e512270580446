"""The evaluation after training (``eval.*``): one dataclass per task, which the task's recipe starts from.

``eval`` is no config group of its own: ``configs/task/<name>.yaml`` places its task's schema at ``eval`` and
sets what differs. Both schemas have every key, so a debug or experiment file that sets a key of the other
task (``debug=fast`` sets ``eval.lengths`` for any task) composes, and the key goes unused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ImageEval:
    """After image training: test/acc@res{R} at other resolutions, with each extrapolation strategy."""

    resolutions: Any = "auto"  # [] to skip; auto: 0.5, 0.75, 1, 1.25, 1.5, 2 x data.img_size in multiples of
    #   the patch size ([16,24,32,40,48,64] for 4 px patches at 32 px); [h,w]: test/acc@res{h}x{w}
    strategies: Any = "default"  # default | all | [list of strategy names]
    max_batches: Any = None  # test batches per size; null: the whole test set (debug=fast: 1)
    test_subset: Any = 1000  # other sizes on a fixed, seeded subset of at most this many test images (null:
    #   all; test/acc always scores the whole test set)
    lengths: Any = None  # sequences only


@dataclass
class SequenceEval:
    """After sequence training: test/acc@len{L} on sequences of exactly L tokens."""

    resolutions: Any = field(default_factory=list)  # images only
    lengths: Any = field(default_factory=lambda: [32, 64, 128, 256, 512])  # [] to skip
    strategies: Any = "default"  # default | all | [list of strategy names]
    max_batches: Any = None  # test batches per size; null: the whole test set (debug=fast: 1)
    test_subset: Any = None  # images only
