"""The one check of a composed config, before anything is written.

``validate(cfg)`` runs once per run, first thing in :func:`vitpos.train.train`,
before any run folder, logger or dataset exists. It raises :class:`UserError`,
which the command line prints as one line ``error: <option>: <what> (<fix>)``
with exit code 2 and no traceback (see ``vitpos.cli.run_main``).

The plain checks (numbers, names, paths, trainer keys, sizes against the data
and the memory this process may use) come first; the encoding checks then ask
the encoding class for its options and strategies and build it on the model's
real geometry, so each encoding's own class stays the one place its rules
(options, value ranges, strategies and aliases, widths, head dims) are written.
"""

from __future__ import annotations

import difflib
import inspect
import math
import os
from pathlib import Path

from omegaconf import OmegaConf

from vitpos.data.fingerprint import IMAGE_EXTENSIONS
from vitpos.data.schedule import size_schedule_problem
from vitpos.errors import UserError

# torch, Lightning and the encodings are imported inside the checks that need them, not here: the
# plain checks then refuse a bad option before torch loads (0.8 s instead of 7.5 s for optim.lr=nan).

#: fraction of the machine's RAM one evaluation batch's attention matrix may take
MEMORY_FRACTION = 0.25


def validate(cfg) -> None:
    """Raise :class:`UserError` for the first problem in ``cfg`` (an OmegaConf config)."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    image = plain["task"]["name"] != "sequence"
    check_numbers(plain)
    check_threads(plain.get("threads", "auto"))
    check_run_names(plain["run"])
    check_data_paths(plain["data"], image)
    check_sizes(plain, image)
    if image:
        check_data_counts(plain)
    check_memory(plain, image)
    check_trainer_keys(plain["trainer"])  # imports Lightning: after the checks that need nothing heavy
    check_encoding(plain, image)


# ------------------------------------------------------------------ numbers
def _number(value, option: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(option, f"expected a number, got {value!r}", f"e.g. {option}=0.001")
    return float(value)


def check_numbers(c: dict) -> None:
    lr = _number(c["optim"]["lr"], "optim.lr")
    if not math.isfinite(lr) or lr <= 0:
        raise UserError("optim.lr", f"must be a finite number > 0, got {lr}", "e.g. optim.lr=1e-3")
    for key in ("weight_decay", "warmup_epochs"):
        value = c["optim"].get(key)
        if value is not None and not (math.isfinite(_number(value, f"optim.{key}")) and value >= 0):
            raise UserError(f"optim.{key}", f"must be a finite number >= 0, got {value}", f"e.g. optim.{key}=0")
    for key in ("batch_size", "eval_batch_size"):
        value = c["data"].get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise UserError(f"data.{key}", f"must be an integer >= 1, got {value!r}", f"e.g. data.{key}=64")
    epochs = c["trainer"].get("max_epochs")
    if not c["trainer"].get("fast_dev_run") and (not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 1):
        raise UserError(
            "trainer.max_epochs", f"must be an integer >= 1, got {epochs!r}", "an untrained model is not a run"
        )
    smoothing = c["task"].get("label_smoothing")
    if smoothing is not None and not 0 <= _number(smoothing, "task.label_smoothing") < 1:
        raise UserError("task.label_smoothing", f"must be in [0, 1), got {smoothing}", "e.g. task.label_smoothing=0.1")
    for key in ("mixup", "cutmix"):
        value = c["task"].get(key)
        if value is not None and _number(value, f"task.{key}") < 0:
            raise UserError(f"task.{key}", f"must be >= 0, got {value}", f"task.{key}=0 turns it off")
    check_count((c.get("eval") or {}).get("test_subset"), "eval.test_subset")
    decay = c["task"].get("ema_decay")
    if decay is not None and not 0 <= _number(decay, "task.ema_decay") < 1:
        raise UserError(
            "task.ema_decay", f"must be in [0, 1), got {decay}", "e.g. task.ema_decay=0.999; 0 turns it off"
        )
    policy = c["data"].get("augment")
    if policy is not None:
        from vitpos.data.augment import POLICIES

        if policy not in POLICIES:
            raise UserError("data.augment", f"unknown policy {policy!r}", f"valid: {', '.join(POLICIES)}")
    val, train = c["data"].get("val_size"), c["data"].get("num_train")
    if isinstance(val, int) and isinstance(train, int) and not 0 <= val < train:
        raise UserError(
            "data.val_size",
            f"{val} leaves no training images out of data.num_train={train}",
            f"use data.val_size < {train}",
        )
    for key in ("train_subset", "test_subset", "num_train", "num_test"):
        check_count(c["data"].get(key), f"data.{key}")


def check_threads(threads) -> None:
    from vitpos.runtime import resolve_threads

    try:
        resolve_threads(threads)
    except ValueError as err:
        raise UserError(
            "threads", f"{threads!r} is not a thread count", "valid: auto, a positive integer, or null"
        ) from err


def check_count(value, option: str) -> None:
    """A count of samples: an integer >= 1, or null for all of them."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise UserError(option, f"must be an integer >= 1 (or null), got {value!r}", f"e.g. {option}=1000")


# -------------------------------------------------------------------- names
#: the config keys that become folder names under run.root (runs/<group>/<model>/<label>-<hash>/seed<k>)
RUN_FOLDER_KEYS = ("group", "model", "label")


def check_folder_name(option: str, value) -> None:
    """The one check of every run-folder component: a plain name, nothing that leaves ``run.root``."""
    text = str(value)
    if not text or text in (".", "..") or "/" in text or "\\" in text or text.startswith("~") or "\0" in text:
        raise UserError(
            option,
            f"must be a plain folder name, got {text!r}",
            "no '/', '..' or absolute path; use run.root=DIR to choose where runs go",
        )


def check_run_names(run: dict) -> None:
    """``run.group``, ``run.model`` and ``run.label`` become folder names under ``run.root``
    (null ``model``/``label``: the model config's name, the encoding's)."""
    for key in RUN_FOLDER_KEYS:
        value = run.get(key)
        if value is None and key != "group":
            continue
        check_folder_name(f"run.{key}", value)


def trainer_options() -> set[str]:
    """The keyword arguments of ``lightning.pytorch.Trainer``."""
    from lightning.pytorch import Trainer

    return set(inspect.signature(Trainer.__init__).parameters) - {"self"}


def check_trainer_keys(trainer: dict) -> None:
    valid = trainer_options()
    for key in trainer:
        if key not in valid:
            close = difflib.get_close_matches(key, sorted(valid), n=1)
            hint = f"did you mean trainer.{close[0]}?" if close else "see lightning.pytorch.Trainer for the valid keys"
            raise UserError(f"trainer.{key}", "not an option of Lightning's Trainer", hint)


def check_data_paths(data: dict, image: bool) -> None:
    root = data.get("root")
    if not image or root is None:
        return
    path = Path(str(root)).expanduser()
    if path.is_file():
        raise UserError("data.root", f"{path} is a file, not a folder", "point data.root at the dataset folder")
    if data.get("format") == "imagefolder":
        missing = [s for s in ("train", "test") if not (path / s).is_dir()]
        if missing:
            raise UserError(
                "data.root",
                f"{path} has no {' or '.join(f'{s}/' for s in missing)} folder",
                "an ImageFolder tree DIR/train/<class>/*.jpg and DIR/test/<class>/*.jpg; "
                "the README's Install section says where to get one",
            )


# -------------------------------------------------------------------- sizes
def check_sizes(c: dict, image: bool) -> None:
    if not image:
        for i, n in enumerate(c.get("eval", {}).get("lengths") or []):
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise UserError(
                    f"eval.lengths[{i}]", f"must be an integer >= 1, got {n!r}", "e.g. eval.lengths=[64,128]"
                )
        train_len = c["data"].get("train_len")
        if not isinstance(train_len, int) or train_len < 1:
            raise UserError("data.train_len", f"must be an integer >= 1, got {train_len!r}", "e.g. data.train_len=64")
        return
    patch = c["model"].get("patch_size")
    if not isinstance(patch, int) or patch < 1:
        raise UserError("model.patch_size", f"must be an integer >= 1, got {patch!r}", "e.g. model.patch_size=4")
    size = c["data"].get("img_size")
    if not isinstance(size, int) or size < patch or size % patch:
        raise UserError(
            "data.img_size", f"{size!r} is not a multiple of model.patch_size={patch}", f"pick a multiple of {patch}"
        )
    for i, r in enumerate(c.get("eval", {}).get("resolutions") or []):
        if not isinstance(r, int) or isinstance(r, bool) or r < patch or r % patch:
            good = (
                sorted({max(patch, (int(r) // patch) * patch), (int(r) // patch + 1) * patch})
                if isinstance(r, int)
                else [size]
            )
            raise UserError(
                f"eval.resolutions[{i}]",
                f"{r!r} is not a multiple of model.patch_size={patch}",
                f"e.g. {' or '.join(map(str, good))}",
            )
    check_train_sizes(c["data"], patch)


def check_train_sizes(data: dict, patch: int) -> None:
    """``data.train_sizes`` (multi-resolution training): null, or sizes the patches tile;
    ``data.size_schedule``: random or progressive (which needs sizes); ``data.size_epochs``: null, or
    the progressive schedule's epochs per size; ``data.native_size``: null or
    a positive integer, and null for generated shapes."""
    sizes = data.get("train_sizes")
    if sizes is not None:
        if not isinstance(sizes, list) or not sizes:
            raise UserError("data.train_sizes", f"must be null or a list of sizes, got {sizes!r}", "e.g. [16,24,32]")
        for i, r in enumerate(sizes):
            if not isinstance(r, int) or isinstance(r, bool) or r < patch or r % patch:
                raise UserError(
                    f"data.train_sizes[{i}]",
                    f"{r!r} is not a multiple of model.patch_size={patch}",
                    f"use multiples of {patch}, e.g. data.train_sizes=[{2 * patch},{3 * patch},{4 * patch}]",
                )
    problem = size_schedule_problem(sizes, data.get("size_schedule", "random"), data.get("size_epochs"))
    if problem is not None:
        raise UserError(*problem)
    native = data.get("native_size")
    if native is not None and (not isinstance(native, int) or isinstance(native, bool) or native < 1):
        raise UserError("data.native_size", f"must be a positive integer or null, got {native!r}", "CIFAR-10: 32")
    if native is not None and data.get("name") == "shapes":
        raise UserError("data.native_size", "generated shapes are drawn at every size", "leave data.native_size=null")


def image_counts(data: dict) -> tuple[int, int, str] | None:
    """(training images, test images, where) of the image data set ``data`` names, or None when
    they cannot be counted before loading (the official release not downloaded yet)."""
    if data.get("name") == "shapes":
        return int(data.get("num_train", 0)), int(data.get("num_test", 0)), "data.num_train / data.num_test"
    root = Path(str(data.get("root"))).expanduser()
    if data.get("format") == "imagefolder":

        def count(split: str) -> int:
            # os.scandir, names only: one Path per file costs ~0.3 s for CIFAR-10's 60,000, on every run
            with os.scandir(root / split) as folders:
                class_dirs = [d.path for d in folders if d.is_dir() and not d.name.startswith(".")]
            total = 0
            for folder in class_dirs:
                with os.scandir(folder) as files:
                    total += sum(
                        1 for f in files if not f.name.startswith(".") and f.name.lower().endswith(IMAGE_EXTENSIONS)
                    )
            return total

        return count("train"), count("test"), str(root)
    if (root / "cifar-10-batches-py").is_dir():
        return 50_000, 10_000, str(root)
    return None


def check_data_counts(c: dict) -> None:
    """Sizes the data cannot give are refused before training: ``data.val_size`` against the
    training images, ``data.train_subset`` against what the validation split leaves,
    ``data.test_subset`` and ``eval.test_subset`` against the test images."""
    data = c["data"]
    counts = image_counts(data)
    if counts is None:
        return
    n_train, n_test, where = counts
    val = data.get("val_size") or 0
    if val >= n_train:
        raise UserError(
            "data.val_size",
            f"{val} leaves no training images: {where} has {n_train} training images",
            f"use data.val_size < {n_train}",
        )
    left = n_train - val
    subset = data.get("train_subset")
    if subset is not None and subset > left:
        raise UserError(
            "data.train_subset",
            f"{subset} is more than the {left} training images left after data.val_size={val} ({where})",
            f"use data.train_subset <= {left}, or null for all of them",
        )
    for option, value in (
        ("data.test_subset", data.get("test_subset")),
        ("eval.test_subset", (c.get("eval") or {}).get("test_subset")),
    ):
        if value is not None and value > n_test:
            raise UserError(
                option,
                f"{value} is more than the {n_test} test images of {where}",
                f"use {option} <= {n_test}, or null",
            )
        if option == "data.test_subset" and value is not None:
            n_test = value


def check_memory(c: dict, image: bool) -> None:
    """Refuse evaluation sizes whose attention matrix (eval batch x heads x N x N
    float32) alone would take more than ``MEMORY_FRACTION`` of the memory this process may use
    (:func:`vitpos.runtime.memory_limit`: RAM, ``ulimit -v``, the cgroup limit)."""
    heads = c["model"].get("num_heads", 1)
    batch = c["data"].get("eval_batch_size") or c["data"].get("batch_size") or 1
    from vitpos.runtime import memory_limit

    budget = MEMORY_FRACTION * memory_limit()
    if image:
        patch, option, sizes = c["model"]["patch_size"], "eval.resolutions", c.get("eval", {}).get("resolutions")
        sizes = [c["data"]["img_size"], *(sizes or [])]
        tokens = [(s // patch) ** 2 + 1 for s in sizes]  # +1: a class token when model.pool=cls
    else:
        option, sizes = "eval.lengths", [c["data"]["train_len"], *(c.get("eval", {}).get("lengths") or [])]
        tokens = list(sizes)
    for i, (size, n) in enumerate(zip(sizes, tokens)):
        need = 4 * batch * heads * n * n
        if need > budget:
            name = option if i else ("data.img_size" if image else "data.train_len")
            raise UserError(
                name,
                f"size {size} needs about {need / 2**30:.0f} GiB for one attention matrix of an evaluation "
                f"batch ({batch} x {heads} heads x {n}^2 tokens), more than {MEMORY_FRACTION:.0%} of the "
                f"{memory_limit() / 2**30:.0f} GiB this process may use (RAM, ulimit -v, cgroup limit)",
                "use smaller sizes, or a smaller data.eval_batch_size",
            )


# ----------------------------------------------------------------- encoding
def _encoding_names(image: bool) -> str:
    from vitpos.encodings import list_encodings

    img, seq = list_encodings(2), list_encodings(1)
    return f"image: {', '.join(img)}; sequence: {', '.join(seq)}"


def check_encoding(c: dict, image: bool) -> None:
    """Name, strategy and options of ``encoding``, then the encoding built on the
    model's geometry (its constructor checks widths and head dims)."""
    from vitpos.encodings import EncodingContext, OptionError, create_encoding, get_encoding_class

    enc = dict(c["encoding"])
    name = enc.pop("name", None)
    try:
        cls = get_encoding_class(str(name))
    except KeyError:
        raise UserError("encoding.name", f"unknown encoding {name!r}", _encoding_names(image)) from None
    dims = 2 if image else 1
    if dims not in cls.grid_dims:
        raise UserError(
            "encoding",
            f"'{name}' is for {'sequences' if image else 'images'}, this is an {'image' if image else 'sequence'} task",
            _encoding_names(image),
        )
    params = cls.option_names()
    unknown = sorted(set(enc) - set(params))
    if unknown:
        raise UserError(
            f"encoding.{unknown[0]}", f"'{name}' takes no option '{unknown[0]}'", f"valid options: {', '.join(params)}"
        )
    strategy = enc.get("strategy")
    if strategy is not None and name != "combo":
        if strategy not in cls.valid_strategies():  # the class declares its strategies and aliases
            raise UserError(
                "encoding.strategy", f"'{name}' has no strategy {strategy!r}", f"valid: {', '.join(cls.strategies)}"
            )
    m = c["model"]
    if image:
        side = c["data"]["img_size"] // m["patch_size"]
        grid, prefix = (side, side), int(m.get("pool") == "cls")
    else:
        grid, prefix = (c["data"]["train_len"],), 0
    if m.get("num_heads", 0) < 1 or m.get("dim", 0) % max(1, m.get("num_heads", 1)):
        raise UserError(
            "model.dim",
            f"{m.get('dim')} is not a multiple of model.num_heads={m.get('num_heads')}",
            "change model.dim or model.num_heads",
        )
    ctx = EncodingContext(m["dim"], m["num_heads"], m["depth"], grid, prefix)
    try:
        exercise(create_encoding(str(name), ctx, **enc), ctx)
    except OptionError as err:  # a bad value of one option: the encoding names it (encoding.base, ...)
        raise UserError(err.option, str(err).rstrip("."), f"configs/encoding/{name}.yaml has the defaults") from None
    except (ValueError, TypeError, KeyError, RuntimeError) as err:
        message = str(err.args[0] if isinstance(err, KeyError) else err)
        raise UserError("encoding", message.rstrip("."), f"model: dim {m['dim']}, {m['num_heads']} heads") from None


def exercise(pe, ctx) -> None:
    """Run every hook once on the training grid: encodings that build their
    tables lazily check their widths there, not in the constructor."""
    import torch

    n = math.prod(ctx.grid)
    with torch.no_grad():
        pe.add_to_tokens(torch.zeros(1, n, ctx.dim), ctx.grid)  # (B, N, D)
        q = torch.zeros(1, ctx.num_heads, ctx.num_prefix_tokens + n, ctx.head_dim)  # (B, H, P + N, Dh)
        pe.after_block(torch.zeros(1, ctx.num_prefix_tokens + n, ctx.dim), ctx.grid, 0)  # (B, P + N, D)
        pe.rotate_qk(q, q, ctx.grid, 0)
        pe.attention_bias(ctx.grid, 0, torch.device("cpu"), torch.float32)
