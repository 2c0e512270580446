"""The typed options: one table of every plain number and true/false option (its type and bounds), one check.

Python counts ``True`` and ``False`` as the integers 1 and 0, and YAML turns ``true`` into
``True``: an integer option written as ``data.train_len=true`` would train on sequences of one
token. :func:`vitpos.sizes.is_integer` is the one test of "an integer, not a boolean"; :data:`OPTIONS`
declares each option once (integer or number, bounds, null allowed, the task it belongs to,
the example the message suggests) and :func:`check_options` checks them all. The options
whose rule involves another option (``data.img_size`` against ``model.patch_size``, the
sizes against the data set) are checked in :mod:`vitpos.checks.data`, and so are the image sizes
(a side or an ``[h, w]`` pair: ``data.img_size``, ``data.train_sizes``, ``data.native_size``,
``eval.resolutions``, by :func:`vitpos.sizes.as_hw`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vitpos.errors import UserError
from vitpos.sizes import is_integer

IMAGE, SEQUENCE = "image", "sequence"


def is_number(value) -> bool:
    """An integer or a float, and not ``True``/``False``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Int:
    """An integer option ``>= minimum``; ``null``: None allowed too; ``items``: a list of such
    integers (each checked, named ``option[i]``)."""

    example: int | str
    minimum: int = 1
    null: bool = False
    items: bool = False
    task: str | None = None  # IMAGE or SEQUENCE: checked for that task only
    fix: str | None = None  # default: e.g. <option>=<example>
    unless: str | None = None  # an option that, when set, makes this one unused (trainer.fast_dev_run)
    maximum: int | None = None
    length: int | None = None  # items: exactly this many

    def problem(self, value) -> str | None:
        if value is None and self.null:
            return None
        if is_integer(value) and value >= self.minimum and (self.maximum is None or value <= self.maximum):
            return None
        most = f" and <= {self.maximum}" if self.maximum is not None else ""
        return f"must be an integer >= {self.minimum}{most}{' (or null)' if self.null else ''}, got {value!r}"


@dataclass(frozen=True)
class Number:
    """A finite number ``>= low`` (``above``: ``> low``), or in ``[low, below)``; ``null``: None allowed."""

    example: float | str
    low: float = 0
    above: bool = False
    below: float | None = None
    null: bool = True
    task: str | None = None
    fix: str | None = None
    items: bool = False
    unless: str | None = None
    length: int | None = None  # items: exactly this many

    def problem(self, value) -> str | None:
        if value is None and self.null:
            return None
        if not is_number(value):
            return f"expected a number, got {value!r}"
        if self.below is not None:
            return None if self.low <= value < self.below else f"must be in [{self.low}, {self.below}), got {value}"
        if math.isfinite(value) and (value > self.low if self.above else value >= self.low):
            return None
        return f"must be a finite number {'>' if self.above else '>='} {self.low}, got {value}"


@dataclass(frozen=True)
class Flag:
    """``true`` or ``false``, nothing else: YAML and Hydra read ``yes``, ``on`` or ``"false"`` as
    text, which Python counts as true, and ``0``/``1`` as integers."""

    task: str | None = None
    unless: str | None = None
    example: str = "true"
    fix: str | None = None
    items: bool = False
    length: int | None = None

    def problem(self, value) -> str | None:
        return None if isinstance(value, bool) else f"must be true or false, got {value!r}"


#: every plain number and true/false option, in the order they are checked
OPTIONS: dict[str, Int | Number | Flag] = {
    "optim.lr": Number("1e-3", above=True, null=False),
    "optim.weight_decay": Number(0),
    "optim.warmup_epochs": Number(0),
    "data.batch_size": Int(64),
    "data.eval_batch_size": Int(64),
    "trainer.max_epochs": Int(10, fix="an untrained model is not a run", unless="trainer.fast_dev_run"),
    "task.label_smoothing": Number(0.1, below=1, task=IMAGE),
    "task.mixup": Number(0, fix="task.mixup=0 turns it off", task=IMAGE),
    "task.cutmix": Number(0, fix="task.cutmix=0 turns it off", task=IMAGE),
    "eval.test_subset": Int(1000, null=True, task=IMAGE),
    "task.ema_decay": Number(0.999, below=1, fix="e.g. task.ema_decay=0.999; 0 turns it off", task=IMAGE),
    "data.train_subset": Int(1000, null=True, task=IMAGE),
    "data.test_subset": Int(1000, null=True, task=IMAGE),
    "data.num_train": Int(1000),
    "data.num_test": Int(1000),
    "model.dim": Int(64),
    "model.depth": Int(4),
    "model.num_heads": Int(4),
    "eval.lengths": Int("[64,128]", items=True, task=SEQUENCE),
    "data.train_len": Int(64, task=SEQUENCE),
    "data.min_len": Int(8, task=SEQUENCE),
    "data.vocab_size": Int(16, task=SEQUENCE),
    "data.num_val": Int(1000, task=SEQUENCE),
    "data.num_length_test": Int(500, task=SEQUENCE),
    "model.patch_size": Int(4, task=IMAGE),
    "data.val_size": Int(5000, minimum=0, task=IMAGE),
    "data.crop_padding": Int(4, minimum=0, task=IMAGE),
    # the options below were taken unchecked until the config fuzzer (tests/test_config_fuzz.py) gave them
    # text: the run then failed in training with a traceback
    "seed": Int(0, minimum=0, maximum=2**32 - 1),  # the range Lightning's seed_everything takes
    "model.mlp_ratio": Number(2.0, above=True, null=False),
    "model.drop_path": Number(0.1, below=1, null=False),
    "model.dropout": Number(0.0, below=1, null=False),
    "model.embed_std": Number(0.1, null=False, task=SEQUENCE),
    "optim.betas": Number("[0.9,0.999]", below=1, null=False, items=True, length=2),  # AdamW's (beta1, beta2)
    "optim.min_lr_ratio": Number(0.01, null=False),
    "data.num_classes": Int(10, task=IMAGE),
    "data.cell": Int(4, task=IMAGE),
    "data.split_seed": Int(0, minimum=0, task=IMAGE),
    "data.augment_magnitude": Int(9, minimum=0, maximum=30, task=IMAGE),  # RandAugment's 31 bins
    "data.augment_ops": Int(2, minimum=0, task=IMAGE),
    "data.offset": Int(3, minimum=0, task=SEQUENCE),
    "data.probe_classes": Int(512, task=SEQUENCE),
    "data.seed": Int(0, minimum=0, task=SEQUENCE),
    "task.pictures_every_n_epochs": Int(0, minimum=0),
    "eval.max_batches": Int(1, null=True),
    "trainer.gradient_clip_val": Number(1.0),
    "trainer.log_every_n_steps": Int(20),
    "trainer.check_val_every_n_epoch": Int(1, null=True),
    "model.compile": Flag(),
    "model.causal": Flag(task=SEQUENCE),
    "model.zero_token_embeddings": Flag(task=SEQUENCE),
    "task.pictures": Flag(),
    "task.ema_warmup": Flag(task=IMAGE),
    "task.flip_tta": Flag(task=IMAGE),
    "trainer.enable_progress_bar": Flag(),
    "data.on_device": Flag(task=IMAGE),
    "data.hflip": Flag(task=IMAGE),
    "data.download": Flag(task=IMAGE),
    "data.anchor": Flag(task=SEQUENCE),
}


ABSENT = object()  # an option the config does not have: not checked (the data set or task has no such option)


def lookup(c: dict, option: str):
    """The value of ``option`` (dotted) in the plain config ``c``; :data:`ABSENT` when a key is absent."""
    node = c
    for key in option.split("."):
        if not isinstance(node, dict) or key not in node:
            return ABSENT
        node = node[key]
    return node


def check_value(option: str, spec: Int | Number | Flag, value) -> None:
    """Raise :class:`UserError` when ``value`` does not fit ``spec``."""
    fix = spec.fix or f"e.g. {option}={spec.example}"
    if not spec.items:
        problem = spec.problem(value)
        if problem:
            raise UserError(option, problem, fix)
        return
    if value is None:
        return
    if not isinstance(value, list):
        raise UserError(option, f"must be a list, got {value!r}", fix)
    for i, item in enumerate(value):
        problem = spec.problem(item)
        if problem:
            raise UserError(f"{option}[{i}]", problem, fix)
    if spec.length is not None and len(value) != spec.length:
        raise UserError(option, f"must be a list of {spec.length}, got {len(value)}: {value!r}", fix)


def check_options(c: dict, image: bool) -> None:
    """Every option of :data:`OPTIONS` that this task (``image`` or not) uses."""
    task = IMAGE if image else SEQUENCE
    for option, spec in OPTIONS.items():
        value = lookup(c, option)
        if value is not ABSENT and _used(c, spec, task):
            check_value(option, spec, value)


def _used(c: dict, spec: Int | Number | Flag, task: str) -> bool:
    """Whether ``task`` uses the option, and no option (``trainer.fast_dev_run``) makes it unused."""
    if spec.task not in (None, task):
        return False
    exempt = ABSENT if spec.unless is None else lookup(c, spec.unless)
    return exempt is ABSENT or not exempt
