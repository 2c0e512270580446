"""Checks of the plain options, before anything is written and without torch: ``task.name`` and the options
each task needs (first: every other check depends on the task), the typed options, run folder names, the
thread count and the ``trainer.*`` keys (the one check that imports Lightning).

:data:`OPTIONS` is the one owner of every plain number and true/false option: :func:`check_options`,
``python train.py --help`` (:func:`vitpos.cli.train_help.option_lines`) and the config fuzzer
(tests/test_config_fuzz.py) read it; defaults live in configs/. :data:`LAUNCHER` does the same for a
sweep's ``hydra.launcher.*``. An integer option refuses ``true`` (YAML's ``data.train_len=true`` is
Python's 1): :func:`vitpos.sizes.is_integer`.
Options whose rule involves another option are checked in :mod:`vitpos.checks.data`.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from vitpos.errors import UserError
from vitpos.integrations import is_timm
from vitpos.sizes import is_integer

IMAGE, SEQUENCE = "image", "sequence"


@dataclass(frozen=True, kw_only=True)
class Spec:
    """What every option says besides its rule; ``defines`` and ``as_before`` set its part in the run's
    identity (:mod:`vitpos.run.identity`, :mod:`vitpos.run.hashed_keys`)."""

    task: str | None = None  # IMAGE or SEQUENCE; None: every task
    fix: str | None = None  # default: e.g. <option>=<example>
    items: bool = False  # a list of such values, each checked and named option[i]
    length: int | None = None  # items: exactly this many
    unless: str | None = None  # an option that, when set, makes this one unused (trainer.fast_dev_run)
    help: str = ""  # one line of --help
    defines: bool = True  # False: changes how a run is shown or how fast it goes, not what it learns (not hashed)
    as_before: tuple = ()  # at these values the option is left out of the hash, so older folders still match

    def fits(self, value) -> bool:  # each kind's own rule; Given: another check owns it
        return True

    def problem(self, value) -> str | None:
        return None if self.fits(value) else f"must be {self.rule()}, got {value!r}"


@dataclass(frozen=True)
class Int(Spec):
    """An integer option ``>= minimum`` (``<= maximum``); ``null``: None allowed too."""

    example: int | str
    minimum: int = 1
    null: bool = False
    maximum: int | None = None
    also: tuple[int, ...] = ()  # values below the minimum that mean something (joblib's n_jobs=-1: every core)

    def rule(self) -> str:
        most = f" and <= {self.maximum}" if self.maximum is not None else ""
        other = "".join(f" (or {v})" for v in self.also)
        return f"an integer >= {self.minimum}{most}{other}{' (or null)' if self.null else ''}"

    def fits(self, value) -> bool:
        bounded = is_integer(value) and value >= self.minimum and (self.maximum is None or value <= self.maximum)
        return (value is None and self.null) or (is_integer(value) and value in self.also) or bounded


@dataclass(frozen=True)
class Number(Spec):
    """A finite number ``>= low`` (``above``: ``> low``), or in ``[low, below)``; ``null``: None allowed."""

    example: float | str
    low: float = 0
    above: bool = False
    below: float | None = None
    null: bool = True

    def rule(self) -> str:
        if self.below is not None:
            return f"in [{self.low}, {self.below})"
        return f"a finite number {'>' if self.above else '>='} {self.low}"

    def problem(self, value) -> str | None:
        if value is None and self.null:
            return None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return f"expected a number, got {value!r}"
        if self.below is not None:
            fits = self.low <= value < self.below
        else:
            fits = math.isfinite(value) and (value > self.low if self.above else value >= self.low)
        return None if fits else f"must be {self.rule()}, got {value}"


@dataclass(frozen=True)
class Flag(Spec):
    """``true`` or ``false`` only: YAML and Hydra read ``yes``, ``on`` or ``"false"`` as text, which Python
    counts as true, and ``0``/``1`` as integers."""

    example: str = "true"

    def rule(self) -> str:
        return "true or false"

    def fits(self, value) -> bool:
        return isinstance(value, bool)


@dataclass(frozen=True)
class Given(Spec):
    """An option whose rule reads more than its own value, so another check owns it (every value fits here);
    listed for its help and its part in the run's identity."""

    rule_text: str
    example: str = ""

    def rule(self) -> str:
        return self.rule_text


#: every plain number and true/false option, in check order, with its ``--help`` line (vitpos/cli/train_help.py)
OPTIONS: dict[str, Spec] = {
    "optim.lr": Number("1e-3", above=True, null=False, help="peak learning rate of AdamW"),
    "optim.weight_decay": Number(0, help="AdamW's decoupled weight decay"),
    "optim.warmup_epochs": Number(0, help="linear warmup epochs, then cosine decay"),
    "data.batch_size": Int(64, help="training examples per batch"),
    "data.eval_batch_size": Int(64, defines=False, help="validation and test examples per batch"),
    "trainer.max_epochs": Int(
        10, fix="an untrained model is not a run", unless="trainer.fast_dev_run", help="epochs to train"
    ),  # fmt: skip
    "task.label_smoothing": Number(0.1, below=1, task=IMAGE, help="label smoothing of the cross-entropy"),
    "task.mixup": Number(0, fix="task.mixup=0 turns it off", task=IMAGE, help="mixup's Beta(a, a); 0: off"),
    "task.cutmix": Number(0, fix="task.cutmix=0 turns it off", task=IMAGE, help="cutmix's Beta(a, a); 0: off"),
    "eval.test_subset": Int(1000, null=True, task=IMAGE, help="test images scored at each other size"),
    "task.ema_decay": Number(
        0.999,
        below=1,
        fix="e.g. task.ema_decay=0.999; 0 turns it off",
        task=IMAGE,
        help="decay of the tested weight average; 0: off",
    ),  # fmt: skip
    "data.train_subset": Int(1000, null=True, task=IMAGE, help="a seeded subset of the training images"),
    "data.test_subset": Int(1000, null=True, task=IMAGE, help="a seeded subset of the test images"),
    "data.num_train": Int(1000, help="generated training examples (shapes, sequences)"),
    "data.num_test": Int(1000, help="generated test examples (shapes, sequences)"),
    "model.dim": Int(64, help="token width"),
    "model.depth": Int(4, help="Transformer blocks"),
    "model.num_heads": Int(4, help="attention heads (model.dim must divide evenly)"),
    "eval.lengths": Int("[64,128]", items=True, task=SEQUENCE, help="test sequence lengths after training"),
    "data.train_len": Int(64, task=SEQUENCE, help="longest training sequence"),
    "data.min_len": Int(8, task=SEQUENCE, help="shortest training sequence"),
    "data.vocab_size": Int(16, task=SEQUENCE, help="tokens of the toy tasks"),
    "data.num_val": Int(1000, task=SEQUENCE, help="validation sequences"),
    "data.num_length_test": Int(500, task=SEQUENCE, help="test sequences per length of eval.lengths"),
    "model.patch_size": Int(4, task=IMAGE, help="patch side in pixels"),
    "data.val_size": Int(5000, minimum=0, task=IMAGE, help="training images held out for validation"),
    "data.crop_padding": Int(4, minimum=0, task=IMAGE, help="random-crop padding, in native pixels"),
    "seed": Int(0, minimum=0, maximum=2**32 - 1, help="the run's seed"),  # the range seed_everything takes
    "model.mlp_ratio": Number(2.0, above=True, null=False, help="MLP width / model.dim"),
    "model.drop_path": Number(0.1, below=1, null=False, help="stochastic depth rate of the last block"),
    "model.dropout": Number(0.0, below=1, null=False, help="dropout after attention and MLP"),
    "model.embed_std": Number(0.1, null=False, task=SEQUENCE, help="token embedding init std"),
    "optim.betas": Number("[0.9,0.999]", below=1, null=False, items=True, length=2, help="AdamW's (beta1, beta2)"),
    "optim.min_lr_ratio": Number(0.01, null=False, help="the cosine decay ends at this fraction of optim.lr"),
    "data.num_classes": Int(10, task=IMAGE, help="classes of the data set"),
    "data.cell": Int(4, task=IMAGE, help="shapes' cell side (keep = model.patch_size)"),
    "data.split_seed": Int(0, minimum=0, task=IMAGE, help="seed of the train/validation split"),
    "data.augment_magnitude": Int(9, minimum=0, maximum=30, task=IMAGE, help="RandAugment's magnitude (31 bins)"),
    "data.augment_ops": Int(2, minimum=0, task=IMAGE, help="RandAugment's ops per image"),
    "data.offset": Int(3, minimum=0, task=SEQUENCE, help="shift task: target at i = input at i - offset"),
    "data.probe_classes": Int(512, task=SEQUENCE, help="position probe: positions told apart"),
    "data.seed": Int(0, minimum=0, task=SEQUENCE, help="the sequences' own seed, whatever the run's seed"),
    "task.pictures_every_n_epochs": Int(0, minimum=0, defines=False, help="pictures every n epochs; 0: at the end"),
    "eval.max_batches": Int(1, null=True, help="test batches per size (null: all)"),
    "trainer.gradient_clip_val": Number(1.0, help="gradient norm clipping"),
    "trainer.log_every_n_steps": Int(20, defines=False, help="training-loss logging interval"),
    "trainer.check_val_every_n_epoch": Int(1, null=True, help="validate every n epochs"),
    "model.compile": Flag(defines=False, help="torch.compile the model (speed only)"),
    "model.causal": Flag(task=SEQUENCE, help="causal attention mask"),
    "model.zero_token_embeddings": Flag(task=SEQUENCE, help="token embeddings at zero: position alone"),
    "task.pictures": Flag(defines=False, help="pictures of the encoding and attention in TensorBoard"),
    "task.ema_warmup": Flag(task=IMAGE, help="ramp the EMA decay up over the first steps"),
    "task.flip_tta": Flag(task=IMAGE, defines=False, help="also score with flip test-time augmentation"),
    "trainer.enable_progress_bar": Flag(defines=False, help="Lightning's progress bar"),
    "data.on_device": Flag(task=IMAGE, defines=False, help="keep the data sets on the training device (GPU runs)"),
    "data.hflip": Flag(task=IMAGE, help="random horizontal flips in training"),
    "data.download": Flag(task=IMAGE, defines=False, help="download CIFAR-10 when it is not in data.root"),
    "data.anchor": Flag(task=SEQUENCE, help="position probe: a distinct first token"),
    # checked elsewhere (checks/data.py, checks/model.py, Lightning); here for their help and identity
    "data.root": Given("a folder", task=IMAGE, defines=False, help="where the data set lies"),
    "optim.impl": Given(
        "auto, fused, foreach or forloop", as_before=("auto",), help="torch's AdamW kernel (auto: fused where it can)"
    ),  # fmt: skip
    **{
        f"data.{key}": Given(rule, task=IMAGE, as_before=before, help=what)
        for key, rule, before, what in (
            ("train_sizes", "null or a list of sizes", (None,), "one size per training batch"),
            ("native_size", "a side, [h,w] or null", (None, 32), "the size the data set is stored at"),
            ("size_schedule", "random or progressive", (None, "random"), "how data.train_sizes are taken"),
            ("size_epochs", "null or epochs per size", (None,), "progressive: the epochs of each size"),
        )
    },
    "model.geometry": Given("written by the run", task=IMAGE, defines=False, help="a timm model's patch, width, depth"),
    **{
        f"trainer.{key}": Given("Lightning's Trainer takes", defines=False, help=what)
        for key, what in (
            ("accelerator", "cpu, gpu or auto"),
            ("devices", "devices per node"),
            ("num_nodes", "nodes (trainer=ddp)"),
            ("strategy", "ddp and the like (trainer=ddp)"),
            ("enable_model_summary", "print the model's layers"),
            ("fast_dev_run", "one batch of each loop, nothing saved"),
            ("default_root_dir", "Lightning's own folder (runs go under run.root)"),
        )
    },
}


#: a sweep's ``hydra.launcher.<key>`` options (joblib's, submitit's), checked by hydra_plugins/vitpos_sweeper
#: before any job starts, where the chosen launcher has them (``timeout_min=0`` would kill every job)
LAUNCHER: dict[str, Int] = {
    "timeout_min": Int(60, help="submitit: minutes a job may run before it is killed"),
    "cpus_per_task": Int(4, null=True, help="submitit: CPU cores of each job's task"),
    "gpus_per_node": Int(1, minimum=0, null=True, help="submitit: GPUs of each job's node"),
    "tasks_per_node": Int(1, help="submitit: processes per node (DDP: one per GPU)"),
    "nodes": Int(1, help="submitit: nodes of each job"),
    "mem_gb": Int(16, null=True, help="submitit: memory of each job's node, GB"),
    "array_parallelism": Int(256, help="submitit_slurm: jobs of the sweep running at once"),
    "n_jobs": Int(2, also=(-1,), help="joblib: jobs side by side in worker processes; -1: one per core"),
}


#: the launchers whose options a sweep may set (Hydra's basic launcher takes none)
LAUNCHERS_WITH_OPTIONS = "hydra/launcher=vitpos_local, vitpos_slurm or joblib"


def check_launcher(launcher: dict) -> None:
    """The options of :data:`LAUNCHER` that the sweep's launcher config ``launcher`` (a mapping) has; and, where
    the launcher's config is a typed one (a dataclass, as every Hydra launcher plugin registers), no key its
    class lacks: ``+hydra.launcher.nosuch=1`` would reach the launcher and fail there, after the sweep began."""
    schema = OmegaConf.get_type(launcher) if isinstance(launcher, DictConfig) else None
    if dataclasses.is_dataclass(schema):
        known = [field.name for field in dataclasses.fields(schema)]
        for key in launcher:
            if key not in known:
                valid = ", ".join(k for k in known if not k.startswith("_"))
                fix = f"valid: {valid}" if valid else f"{LAUNCHERS_WITH_OPTIONS} take some"
                raise UserError(f"hydra.launcher.{key}", f"not an option of {schema.__name__}", fix)
    for key, spec in LAUNCHER.items():
        if key in launcher:
            check_value(f"hydra.launcher.{key}", spec, launcher[key])


def describe(spec: Spec) -> str:
    """The rule of ``spec`` as ``--help`` shows it: ``an integer >= 1``, ``a list of 2: in [0, 1)``."""
    rule = spec.rule()
    if isinstance(spec, Number) and spec.null and "null" not in rule:
        rule += " (or null)"
    if spec.items:
        rule = f"a list{f' of {spec.length}' if spec.length else ''}, each {rule}"
    return rule


ABSENT = object()  # an option the config does not have (this data set or task has none): not checked


def lookup(c: dict, option: str):
    """The value of ``option`` (dotted) in the plain config ``c``; :data:`ABSENT` when a key is absent."""
    node = c
    for key in option.split("."):
        if not isinstance(node, dict) or key not in node:
            return ABSENT
        node = node[key]
    return node


def check_value(option: str, spec: Spec, value) -> None:
    """Raise :class:`UserError` when ``value`` does not fit ``spec`` (``items``: null, or a list whose items do)."""
    fix = spec.fix or f"e.g. {option}={spec.example}"
    if spec.items and value is None:
        return
    if spec.items and not isinstance(value, list):
        raise UserError(option, f"must be a list, got {value!r}", fix)
    named = {f"{option}[{i}]": v for i, v in enumerate(value)} if spec.items else {option: value}
    for name, item in named.items():
        if problem := spec.problem(item):
            raise UserError(name, problem, fix)
    if spec.items and spec.length is not None and len(value) != spec.length:
        raise UserError(option, f"must be a list of {spec.length}, got {len(value)}: {value!r}", fix)


def check_options(c: dict, image: bool) -> None:
    """Every option of :data:`OPTIONS` that this task uses, unless an option (``trainer.fast_dev_run``) makes
    it unused."""
    task = IMAGE if image else SEQUENCE
    for option, spec in OPTIONS.items():
        value = lookup(c, option)
        exempt = ABSENT if spec.unless is None else lookup(c, spec.unless)
        if value is not ABSENT and spec.task in (None, task) and (exempt is ABSENT or not exempt):
            check_value(option, spec, value)


def check_task(task) -> bool:
    """True for an image task, False for a sequence one; else a :class:`UserError` naming ``task.name``,
    before the run folder exists (:func:`vitpos.tasks.build.build` refuses it only after)."""
    name = task.get("name") if isinstance(task, dict) else None
    if name not in ("classification", "sequence"):  # the tasks vitpos.tasks.build.build knows (configs/task/)
        raise UserError("task.name", f"unknown task {name!r}", "valid: classification, sequence (task=...)")
    return name != "sequence"


#: options read without a default, by task (None: every task); ``~key`` or the other task's config can drop one
NEEDS = {
    None: ("data", "model", "encoding", "optim", "trainer", "run", "optim.lr", "trainer.max_epochs"),
    "model": ("model.dim", "model.depth", "model.num_heads"),  # not for model=timm: timm's model has them
    "image": ("data.name", "data.img_size"),
    "image model": ("model.patch_size",),  # not for model=timm either
    "sequence": ("data.task", "data.train_len", "data.vocab_size"),
}
#: where a missing option of a section comes from: the group configs of each task
SOURCES = {
    ("model", True): "an image model config sets it, e.g. model=vit_micro (configs/model/)",
    ("model", False): "a sequence model config sets it: model=seq_small",
    ("data", True): "an image data config sets it: data=cifar10 or data=shapes",
    ("data", False): "a sequence data config sets it, e.g. data=seq_copy (configs/data/)",
}


def check_needed(c: dict, image: bool) -> None:
    """Every option of :data:`NEEDS` this task reads is present (null values are the typed checks'
    business); ``model=timm`` needs no geometry: it comes from timm (``checks/model.py``)."""
    timm = isinstance(c.get("model"), dict) and is_timm(c["model"])
    groups = [None, "image" if image else "sequence"] + ([] if timm else ["model"] + ["image model"] * image)
    for option in (o for g in groups for o in NEEDS[g]):
        if lookup(c, option) is ABSENT:
            fix = SOURCES.get((option.split(".")[0], image), f"configs/ sets it; '~{option}' deletes it")
            raise UserError(option, f"missing, and the {'image' if image else 'sequence'} task needs it", fix)


def check_run_names(run: dict) -> None:
    """``run.group``, ``run.model`` and ``run.label`` become folder names under ``run.root``
    (runs/<group>/<model>/<label>-<hash>/seed<k>): plain names, nothing that leaves ``run.root``
    (null ``model``/``label``: the model config's name, the encoding's)."""
    for key in [k for k in ("group", "model", "label") if k == "group" or run.get(k) is not None]:
        text = str(run.get(key))
        if not text or text in (".", "..") or any(ch in text for ch in "/\\\0") or text.startswith("~"):
            fix = "no '/', '..' or absolute path; use run.root=DIR to choose where runs go"
            raise UserError(f"run.{key}", f"must be a plain folder name, got {text!r}", fix)


def check_run_root(root) -> None:
    """``run.root``: a folder's path (made if missing), not empty (that would be this folder) and not a
    file or a path through one."""
    fix = "give the folder runs go in, e.g. run.root=runs"
    text = "" if root is None else str(root)
    if not text.strip():
        raise UserError("run.root", "empty: the runs would land in the current folder", fix)
    blocking = next((p for p in (Path(text), *Path(text).parents) if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        where = "is a file" if str(blocking) == text else f"lies inside the file {blocking}"
        raise UserError("run.root", f"{text} {where}, not a folder", fix)


def check_threads(threads) -> None:
    """``threads``: auto, a positive integer or null (the rule is :func:`vitpos.runtime.resolve_threads`)."""
    from vitpos.runtime import resolve_threads

    try:
        if isinstance(threads, bool):  # resolve_threads would take true for 1 thread
            raise ValueError(threads)
        resolve_threads(threads)
    except ValueError as err:
        fix = "valid: auto, a positive integer, or null"
        raise UserError("threads", f"{threads!r} is not a thread count", fix) from err


def check_trainer_values(trainer: dict) -> None:
    """``trainer.precision`` and ``trainer.devices`` as Lightning takes them, refused here in one line
    (Lightning refuses them only when the Trainer is made, with a traceback)."""
    import typing

    from lightning.fabric.plugins.precision.precision import _PRECISION_INPUT

    valid = [v for literal in typing.get_args(_PRECISION_INPUT) for v in typing.get_args(literal)]
    precision = trainer.get("precision", "auto")
    if precision != "auto" and (isinstance(precision, bool) or precision not in valid):
        names = ", ".join(dict.fromkeys(str(v) for v in valid))
        raise UserError("trainer.precision", f"{precision!r} is not a precision", f"valid: auto, {names}")
    devices = trainer.get("devices", "auto")
    fine = (
        devices == "auto"
        or (isinstance(devices, int) and not isinstance(devices, bool) and (devices >= 1 or devices == -1))
        or (isinstance(devices, str) and devices.strip() not in ("", "0"))
        or (isinstance(devices, list) and devices and all(isinstance(d, int) and d >= 0 for d in devices))
    )
    if not fine:
        raise UserError("trainer.devices", f"{devices!r} is not a device count or list",
                        "valid: auto, a count of 1 or more, -1 for all, or a list of indices like [0,1]")  # fmt: skip


def check_trainer_keys(trainer: dict) -> None:
    """A key ``lightning.pytorch.Trainer`` does not take is refused with the closest one it does."""
    from lightning.pytorch import Trainer

    valid = set(inspect.signature(Trainer.__init__).parameters) - {"self"}
    for key in trainer:
        if key not in valid:
            close = difflib.get_close_matches(key, sorted(valid), n=1)
            hint = f"did you mean trainer.{close[0]}?" if close else "see lightning.pytorch.Trainer for the valid keys"
            raise UserError(f"trainer.{key}", "not an option of Lightning's Trainer", hint)
