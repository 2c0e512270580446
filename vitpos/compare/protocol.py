"""The training protocol of a run, read from its saved config: what it trained on, how long,
at which sizes and precision, as columns of the report, and the one sentence made from them.

The sentence (:meth:`Protocol.budget`, e.g. ``cifar10, full train set (5,000 val) × 12 epochs,
trained at 16-32 px, progressive 7/3/2 (native 32)``) is the ``budget`` key of a report: runs whose
budgets differ land in different sections and plot panels, because their numbers are not
comparable. It is written here only and never read back: a table that needs the epochs or
the train sizes reads the columns (:meth:`Protocol.columns`, :meth:`Protocol.from_columns`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vitpos.sizes import compact, is_integer, parse_name, size_order

#: the protocol columns, in the order a row holds them
COLUMNS = (
    "data", "train_images", "val_images", "epochs", "img_size", "native_size", "train_sizes", "size_schedule",
    "size_epochs", "precision", "limits",
)  # fmt: skip
#: Lightning's options that train, validate or test on part of the data: a run that sets one is said so
LIMITS = ("limit_train_batches", "limit_val_batches", "limit_test_batches")


@dataclass(frozen=True)
class Protocol:
    """How one run trained. ``train_sizes``: the sizes of multi-resolution training (empty: one
    size, ``img_size``); ``size_schedule``: how those sizes take turns (``progressive``: runs of
    epochs, ``size_epochs`` of them per size when given; anything else: drawn per batch). A size
    is held as :func:`vitpos.sizes.compact` writes it: the side of a square, ``"16x32"`` otherwise.
    ``train_images``: the images (or sequences) trained on, without the validation ones
    (``val_images``, :func:`split_counts`); None: the full train set (its size is not in the config).
    ``limits``: Lightning's ``limit_*_batches`` the run set (``limit_train_batches=2``, space
    separated): then it used part of those images only."""

    data: str = "?"
    train_images: int | None = None  # None: the full train set
    val_images: int | None = None  # None: not in the config
    epochs: int | None = None
    img_size: int | str | None = None
    native_size: int | str | None = None
    train_sizes: tuple[int | str, ...] = ()
    size_schedule: str = ""
    size_epochs: tuple[int, ...] = ()
    precision: str = ""
    limits: str = ""

    @classmethod
    def of_config(cls, cfg: dict | None) -> Protocol | None:
        """The protocol in a run's saved config (``hparams.yaml``'s ``cfg``); None without one."""
        if not cfg:
            return None
        data, trainer = cfg.get("data") or {}, cfg.get("trainer") or {}
        train, val = split_counts(data)
        return cls(
            data=str(data.get("name", "?")),
            train_images=train,
            val_images=val,
            epochs=trainer.get("max_epochs"),
            img_size=None if data.get("img_size") is None else compact(data["img_size"]),
            native_size=None if data.get("native_size") is None else compact(data["native_size"]),
            train_sizes=tuple(compact(s) for s in data.get("train_sizes") or ()),
            size_schedule=str(data.get("size_schedule") or ""),
            size_epochs=tuple(int(e) for e in data.get("size_epochs") or ()),
            precision=str(trainer.get("precision") or ""),
            limits=" ".join(f"{k}={trainer[k]}" for k in LIMITS if _limits(trainer.get(k))),
        )

    def columns(self) -> dict[str, object]:
        """The protocol as one row's cells: numbers, strings, and sizes joined by ``/``."""
        cells = {name: getattr(self, name) for name in COLUMNS}
        for name in ("train_sizes", "size_epochs"):
            cells[name] = "/".join(map(str, cells[name]))
        return cells

    @classmethod
    def from_columns(cls, row) -> Protocol:
        """The protocol of a row holding :meth:`columns` (a dict, a pandas row, or a CSV row of strings)."""
        return cls(
            data=str(row.get("data") or "?"),
            train_images=_number(row.get("train_images")),
            val_images=_number(row.get("val_images")),
            epochs=_number(row.get("epochs")),
            img_size=_size(row.get("img_size")),
            native_size=_size(row.get("native_size")),
            train_sizes=_sizes(row.get("train_sizes")),
            size_schedule=_text(row.get("size_schedule")),
            size_epochs=_numbers(row.get("size_epochs")),
            precision=_text(row.get("precision")),
            limits=_text(row.get("limits")),
        )

    @property
    def progressive(self) -> bool:
        """Multi-resolution training in runs of epochs per size (not a size drawn per batch)."""
        return bool(self.train_sizes) and self.size_schedule == "progressive"

    def schedule(self) -> str:
        """``progressive 7/3/2`` (epochs per size), ``progressive`` (split evenly), or "" (one size,
        or a size drawn per batch)."""
        if not self.progressive:
            return ""
        return "progressive" + (" " + "/".join(map(str, self.size_epochs)) if self.size_epochs else "")

    def trained_at(self) -> str | None:
        """``16-32`` (multi-resolution) or ``16`` (one size other than the native one); None for the
        plain protocol, training and testing at the native size."""
        if self.train_sizes:  # smallest to largest in pixels: 16-32, 16-16x32
            return f"{min(self.train_sizes, key=size_order)}-{max(self.train_sizes, key=size_order)}"
        if self.native_size and self.img_size and self.native_size != self.img_size:
            return str(self.img_size)
        return None

    def budget(self) -> str:
        """The sentence naming this protocol: ``<data>, <n> train (<v> val) × <e> epochs[,
        limit_train_batches=<b>]`` and, when it is not the plain one, ``, trained at <sizes> px[,
        progressive[ 7/3/2]] (native <n>)``."""
        size = f"{self.train_images:,} train" if self.train_images is not None else "full train set"
        size += f" ({self.val_images:,} val)" if self.val_images else ""
        epochs = "" if self.epochs is None else f" × {self.epochs} epoch" + ("" if self.epochs == 1 else "s")
        text = f"{self.data}, {size}{epochs}" + "".join(f", {limit}" for limit in self.limits.split())
        sizes = self.trained_at()
        if sizes is None:
            return text
        schedule = f", {self.schedule()}" if self.schedule() else ""
        native = f" (native {self.native_size})" if self.native_size else ""
        return f"{text}, trained at {sizes} px{schedule}{native}"


def split_counts(data: dict) -> tuple[int | None, int | None]:
    """(images trained on, validation images) of a saved ``data`` config, None where it does not
    say. An image data set (``data.val_size``) carves its validation split out of its training
    images (shapes: ``data.num_train`` generated, ``val_size`` of them validate; CIFAR-10: its files)
    and may keep ``data.train_subset`` of the rest; a sequence task draws ``data.num_val`` on top
    of ``data.num_train``."""
    subset, total = _count(data, "train_subset"), _count(data, "num_train")
    if "val_size" not in data:  # the sequence tasks, or a config without a split
        return subset or total, _count(data, "num_val")
    val = _count(data, "val_size")
    if subset is None and total is not None and data.get("name") == "shapes":  # num_train: shapes only
        subset = total - (val or 0)
    return subset, val


def _limits(value) -> bool:
    """A ``limit_*_batches`` value that leaves part of the data out: a count of batches (``1`` is one
    batch), a fraction below 1 (``1.0`` and None: all of it)."""
    return value is not None and not (isinstance(value, float) and value >= 1.0)


def _count(data: dict, key: str) -> int | None:
    return data[key] if is_integer(data.get(key)) else None


def _missing(value) -> bool:
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


def _number(value) -> int | None:
    return None if _missing(value) else int(float(value))


def _size(value) -> int | str | None:
    """A size cell (``32``, ``32.0`` as pandas may read it, ``16x32``) as :func:`compact` writes it."""
    if _missing(value):
        return None
    return compact(parse_name(str(value).removesuffix(".0")))


def _sizes(value) -> tuple[int | str, ...]:
    """Sizes joined by ``/`` (``16/16x32/32``), each as :func:`_size` reads it."""
    return () if _missing(value) else tuple(_size(v) for v in str(value).split("/"))


def _numbers(value) -> tuple[int, ...]:
    return () if _missing(value) else tuple(int(v) for v in str(value).split("/"))


def _text(value) -> str:
    return "" if _missing(value) else str(value)
