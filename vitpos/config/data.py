"""The data sets' options and defaults (``data=cifar10``, ``shapes``, ``seq_copy``, ...): one dataclass per data set,
which the data modules fill a config from. ``num_classes`` is what the data set has, not an option. Each field's
rule is attached once: a subclass changes only the default.
"""

from __future__ import annotations

from typing import Any

from vitpos.config.rules import IMAGE, SEQUENCE, Flag, Given, Int, option, schema

BATCH = Int(64, help="training examples per batch")
EVAL_BATCH = Int(64, defines=False, help="validation and test examples per batch")
NUM_TRAIN = Int(1000, help="generated training examples (shapes, sequences)")
NUM_TEST = Int(1000, help="generated test examples (shapes, sequences)")
NATIVE = Given("a side, [h,w] or null", task=IMAGE, as_before=(None, 32), help="the size the data set is stored at")
SCHEDULE = Given("random or progressive", task=IMAGE, as_before=(None, "random"), help="how data.train_sizes are taken")
EPOCHS = Given("null or epochs per size", task=IMAGE, as_before=(None,), help="progressive: the epochs of each size")
ON_DEVICE = Flag(task=IMAGE, defines=False, help="keep the data sets on the training device (GPU runs)")
OFFSET = Int(3, minimum=0, task=SEQUENCE, help="shift task: target at i = input at i - offset")
LENGTH_TEST = Int(500, task=SEQUENCE, help="test sequences per length of eval.lengths")
DATA_SEED = Int(0, minimum=0, task=SEQUENCE, help="the sequences' own seed, whatever the run's seed")
SIZES = Given("null or a list of sizes", task=IMAGE, as_before=(None,), help="one size per training batch")
SUBSET = Int(1000, null=True, task=IMAGE, help="a seeded subset of the training images")
DOWNLOAD = Flag(task=IMAGE, defines=False, help="download CIFAR-10 when it is not in data.root")
MAGNITUDE = Int(9, minimum=0, maximum=30, task=IMAGE, help="RandAugment's magnitude (31 bins)")


@schema
class ImageData:
    """What every image data set has: CIFAR-10's defaults, which :class:`ShapesData` changes where it differs."""

    name: Any = "cifar10"
    img_size: Any = 32  # the training resolution R, or [h,w]; below native the images are downsampled once
    native_size: Any = option(32, rule=NATIVE)  # eval at this size sees the original pixels
    train_sizes: Any = option(None, rule=SIZES)  # e.g. [16,24,32] or [16,[16,32],32], one size per batch
    size_schedule: Any = option("random", rule=SCHEDULE)  # random: a size per batch | progressive: FixRes-style
    size_epochs: Any = option(None, rule=EPOCHS)  # progressive: e.g. [7,3,2] (scaled to trainer.max_epochs)
    on_device: Any = option(False, rule=ON_DEVICE)  # keep the uint8 data sets there (GPU sweeps: no copy per step)
    num_classes: Any = option(10, rule=Int(10, task=IMAGE, help="classes of the data set"))
    batch_size: Any = option(128, rule=BATCH)
    eval_batch_size: Any = option(512, rule=EVAL_BATCH)
    val_size: Any = option(5000, rule=Int(5000, minimum=0, task=IMAGE, help="training images held out for validation"))
    train_subset: Any = option(None, rule=SUBSET)  # keep only this many training images (short budgets)
    test_subset: Any = option(None, rule=Int(1000, null=True, task=IMAGE, help="a seeded subset of the test images"))
    split_seed: Any = option(0, rule=Int(0, minimum=0, task=IMAGE, help="seed of the train/validation split"))
    crop_padding: Any = option(4, rule=Int(4, minimum=0, task=IMAGE, help="random-crop padding, in native pixels"))
    #   scaled to img_size when training below native: 2 at 16 px
    hflip: Any = option(True, rule=Flag(task=IMAGE, help="random horizontal flips in training"))
    augment: Any = "none"  # per-image policy on the uint8 tensors after crop/flip: none | trivial | randaugment
    augment_magnitude: Any = option(9, rule=MAGNITUDE)  # randaugment: strength (of 31 bins)
    augment_ops: Any = option(2, rule=Int(2, minimum=0, task=IMAGE, help="RandAugment's ops per image"))


@schema
class Cifar10Data(ImageData):
    """CIFAR-10. ``format=torchvision`` downloads the official release into ``root`` on first use;
    ``format=imagefolder`` reads ``root/train/<class>/*`` and ``root/test/<class>/*`` (a JPEG copy)."""

    format: Any = "torchvision"
    root: Any = option("data", rule=Given("a folder", task=IMAGE, defines=False, help="where the data set lies"))
    download: Any = option(True, rule=DOWNLOAD)


@schema
class ShapesData(ImageData):
    """Generated offline: the red square's quadrant relative to a blue square (4 classes, chance 25%); ``img_size``
    ``[h,w]``: a grid of h/cell x w/cell cells. ``native_size`` none: every size is drawn from the generator (same
    layouts and labels, sharp squares); ``hflip`` and a geometric ``augment`` would change the label."""

    name: Any = "shapes"
    native_size: Any = None
    num_classes: Any = 4
    val_size: Any = 2000
    hflip: Any = False
    num_train: Any = option(20000, rule=NUM_TRAIN)
    num_test: Any = option(4000, rule=NUM_TEST)
    cell: Any = option(4, rule=Int(4, task=IMAGE, help="shapes' cell side (keep = model.patch_size)"))


@schema
class SequenceData:
    """A toy sequence task (:class:`vitpos.data.sequence.SequenceDataModule`, whose arguments these are)."""

    name: Any = "seq_copy"
    task: Any = "copy_offset"  # copy_offset | reverse | sort | position_probe
    vocab_size: Any = option(16, rule=Int(16, task=SEQUENCE, help="tokens of the toy tasks"))
    train_len: Any = option(64, rule=Int(64, task=SEQUENCE, help="longest training sequence"))  # = the model's
    min_len: Any = option(8, rule=Int(8, task=SEQUENCE, help="shortest training sequence"))  # uniform lengths
    offset: Any = option(3, rule=OFFSET)
    probe_classes: Any = option(512, rule=Int(512, task=SEQUENCE, help="position probe: positions told apart"))
    anchor: Any = option(False, rule=Flag(task=SEQUENCE, help="position probe: a distinct first token"))
    num_train: Any = option(20000, rule=NUM_TRAIN)
    num_val: Any = option(1000, rule=Int(1000, task=SEQUENCE, help="validation sequences"))
    num_test: Any = option(1000, rule=NUM_TEST)
    num_length_test: Any = option(500, rule=LENGTH_TEST)  # sequences per length for test/acc@len{L}
    batch_size: Any = option(64, rule=BATCH)
    eval_batch_size: Any = option(128, rule=EVAL_BATCH)
    seed: Any = option(0, rule=DATA_SEED)  # the data's own seed: the same sequences whatever the run's seed


@schema
class SeqCopyData(SequenceData):
    """Target at i = input at i - offset: needs relative position only (chance 1/16)."""


@schema
class SeqReverseData(SequenceData):
    """Target at i = input at n-1-i (n: the sequence's own length): needs absolute position."""

    name: Any = "seq_reverse"
    task: Any = "reverse"


@schema
class SeqProbeData(SequenceData):
    """Every input is the same token, target = its index: can the encoding tell absolute position?"""

    name: Any = "seq_probe"
    task: Any = "position_probe"
