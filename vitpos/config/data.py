"""The data sets' options and defaults (``data=cifar10``, ``shapes``, ``seq_copy``, ...); the data modules fill a
config from them. ``num_classes`` is what the data set has, not a choice."""

from __future__ import annotations

from typing import Any

from vitpos.config.rules import IMAGE, SEQUENCE, Flag, Given, Int, option, schema, variant

BATCH = Int(64, help="training examples per batch")
EVAL_BATCH = Int(64, defines=False, help="validation and test examples per batch")
NUM_TRAIN = Int(1000, help="generated training examples (shapes, sequences)")
NUM_TEST = Int(1000, help="generated test examples (shapes, sequences)")
NATIVE = Given("a side, [h,w] or null", task=IMAGE, as_before=(None, 32))
SIZES = Given("null or a list of sizes", task=IMAGE, as_before=(None,))
SCHEDULE = Given("random or progressive", task=IMAGE, as_before=(None, "random"))
EPOCHS = Given("null or epochs per size", task=IMAGE, as_before=(None,))
ON_DEVICE = Flag(task=IMAGE, defines=False)
MAGNITUDE = Int(9, minimum=0, maximum=30, task=IMAGE)


@schema
class ImageData:
    """What every image data set has: CIFAR-10's defaults, which :class:`ShapesData` changes where it differs."""

    name: Any = "cifar10"
    img_size: Any = 32  # the training resolution R, or [h,w]; below native the images are downsampled once
    native_size: Any = option(32, "the size the data set is stored at", NATIVE)
    train_sizes: Any = option(None, "one size per training batch", SIZES)
    size_schedule: Any = option("random", "how data.train_sizes are taken", SCHEDULE)
    size_epochs: Any = option(None, "progressive: the epochs of each size", EPOCHS)
    on_device: Any = option(False, "keep the data sets on the training device (GPU runs)", ON_DEVICE)
    num_classes: Any = option(10, "classes of the data set", Int(10, task=IMAGE))
    batch_size: Any = option(128, rule=BATCH)
    eval_batch_size: Any = option(512, rule=EVAL_BATCH)
    val_size: Any = option(5000, "training images held out for validation", Int(5000, minimum=0, task=IMAGE))
    train_subset: Any = option(None, "a seeded subset of the training images", Int(1000, null=True, task=IMAGE))
    test_subset: Any = option(None, "a seeded subset of the test images", Int(1000, null=True, task=IMAGE))
    split_seed: Any = option(0, "seed of the train/validation split", Int(0, minimum=0, task=IMAGE))
    crop_padding: Any = option(4, "random-crop padding, in native pixels", Int(4, minimum=0, task=IMAGE))
    hflip: Any = option(True, "random horizontal flips in training", Flag(task=IMAGE))
    augment: Any = "none"  # per-image policy on the uint8 tensors after crop/flip: none | trivial | randaugment
    augment_magnitude: Any = option(9, "RandAugment's magnitude (31 bins)", MAGNITUDE)
    augment_ops: Any = option(2, "RandAugment's ops per image", Int(2, minimum=0, task=IMAGE))


@schema("data", "cifar10")
class Cifar10Data(ImageData):
    """CIFAR-10. ``format=torchvision`` downloads the official release into ``root`` on first use;
    ``format=imagefolder`` reads ``root/train/<class>/*`` and ``root/test/<class>/*`` (a JPEG copy)."""

    format: Any = "torchvision"
    root: Any = option("data", "where the data set lies", Given("a folder", task=IMAGE, defines=False))
    download: Any = option(True, "download CIFAR-10 when it is not in data.root", Flag(task=IMAGE, defines=False))


@schema("data", "shapes")
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
    cell: Any = option(4, "shapes' cell side (keep = model.patch_size)", Int(4, task=IMAGE))


@schema("data", "seq_copy")
class SequenceData:
    """A toy sequence task (:class:`vitpos.data.sequence.SequenceDataModule`, whose arguments these are);
    ``data=seq_copy``: target at i = input at i - offset, which needs relative position only (chance 1/16)."""

    name: Any = "seq_copy"
    task: Any = "copy_offset"  # copy_offset | reverse | sort | position_probe
    vocab_size: Any = option(16, "tokens of the toy tasks", Int(16, task=SEQUENCE))
    train_len: Any = option(64, "longest training sequence (= the model's)", Int(64, task=SEQUENCE))
    min_len: Any = option(8, "shortest training sequence (lengths uniform)", Int(8, task=SEQUENCE))
    offset: Any = option(3, "shift task: target at i = input at i - offset", Int(3, minimum=0, task=SEQUENCE))
    probe_classes: Any = option(512, "position probe: positions told apart", Int(512, task=SEQUENCE))
    anchor: Any = option(False, "position probe: a distinct first token", Flag(task=SEQUENCE))
    num_train: Any = option(20000, rule=NUM_TRAIN)
    num_val: Any = option(1000, "validation sequences", Int(1000, task=SEQUENCE))
    num_test: Any = option(1000, rule=NUM_TEST)
    num_length_test: Any = option(500, "test sequences per length of eval.lengths", Int(500, task=SEQUENCE))
    batch_size: Any = option(64, rule=BATCH)
    eval_batch_size: Any = option(128, rule=EVAL_BATCH)
    seed: Any = option(0, "the sequences' own seed, whatever the run's seed", Int(0, minimum=0, task=SEQUENCE))


SeqCopyData = SequenceData
#: target at i = input at n-1-i (n: the sequence's own length): needs absolute position
SeqReverseData = variant(SequenceData, "data", "seq_reverse", name="seq_reverse", task="reverse")
#: every input is the same token, target = its index: can the encoding tell absolute position?
SeqProbeData = variant(SequenceData, "data", "seq_probe", name="seq_probe", task="position_probe")
