"""The evaluation after training (``eval.*``), per task; both have every key, so a file setting the other task's
(``debug=fast`` sets ``eval.lengths``) composes, and the key goes unused."""

from __future__ import annotations

from typing import Any

from vitpos.config.rules import IMAGE, SEQUENCE, Int, option, schema

MAX_BATCHES = Int(1, null=True, help="test batches per size (null: all)")
TEST_SUBSET = Int(1000, null=True, task=IMAGE, help="test images scored at each other size")
LENGTHS = Int("[64,128]", items=True, task=SEQUENCE, help="test sequence lengths after training")


@schema("eval", "image")
class ImageEval:
    """After image training: test/acc@res{R} at other resolutions, with each extrapolation strategy."""

    resolutions: Any = "auto"  # [] to skip; auto: 0.5, 0.75, 1, 1.25, 1.5, 2 x data.img_size in multiples of
    #   the patch size ([16,24,32,40,48,64] for 4 px patches at 32 px); [h,w]: test/acc@res{h}x{w}
    strategies: Any = "default"  # default | all | [list of strategy names]
    max_batches: Any = option(None, rule=MAX_BATCHES)  # null: the whole test set (debug=fast: 1)
    test_subset: Any = option(1000, rule=TEST_SUBSET)  # seeded, at other sizes (test/acc scores the whole test set)
    lengths: Any = option(None, rule=LENGTHS)  # sequences only


@schema("eval", "sequence")
class SequenceEval:
    """After sequence training: test/acc@len{L} on sequences of exactly L tokens."""

    resolutions: Any = option([])  # images only
    lengths: Any = option([32, 64, 128, 256, 512], rule=LENGTHS)  # [] to skip
    strategies: Any = "default"
    max_batches: Any = option(None, rule=MAX_BATCHES)
    test_subset: Any = option(None, rule=TEST_SUBSET)  # images only
