"""Image sizes: one side (a square) or an ``[h, w]`` pair, everywhere a size is an option.

``data.img_size``, every entry of ``data.train_sizes`` and ``eval.resolutions``,
``data.native_size`` and the tools' ``resolutions=`` each take ``32`` or ``[16, 32]``
(height, width). Every reader turns the option into ``(h, w)`` with :func:`as_hw`, the one
rule of what a size is, so a malformed one (``[16]``, ``[16, 32, 8]``, ``[0, 16]``, ``true``)
is refused in one place with an error naming the option.

A size is written back as its side when it is square and as ``HxW`` otherwise
(:func:`size_name`: ``16``, ``16x32``): in metric tags (``test/acc@res16x32``; a square keeps
``test/acc@res16``, so existing runs and reports keep their tags), in table columns and in the
run hash (:func:`compact`: ``[32, 32]`` is the same run as ``32``). Size columns and a plot's
ticks go the squares first, then the other sizes (:func:`column_order`); the sizes
``eval.resolutions=auto`` stands for are :func:`default_resolutions`. Imports only
:mod:`vitpos.errors`, so every layer may use it (the model, the data, the reports).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from vitpos.errors import UserError

#: an image size as (height, width) in pixels
HW = tuple[int, int]


def is_integer(value) -> bool:
    """An integer, and not ``True``/``False`` (which Python counts as 1 and 0): the one test of
    every integer option (also :mod:`vitpos.checks.options`)."""
    return isinstance(value, int) and not isinstance(value, bool)


def as_hw(value, option: str = "size") -> HW:
    """``value`` as ``(h, w)``: a side ``s`` is ``(s, s)``; a pair ``[h, w]`` (a list, a tuple or
    Hydra's ListConfig) is itself. Anything else (a bool, text, a pair of another length, a side
    below 1) raises :class:`UserError` naming ``option``, the config option it came from."""
    if is_integer(value) and value > 0:
        return int(value), int(value)
    pair = isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2
    if pair and all(is_integer(v) and v > 0 for v in value):
        return int(value[0]), int(value[1])
    shown = list(value) if isinstance(value, Sequence) and not isinstance(value, str) else value
    raise UserError(
        option,
        f"{shown!r} is not a size: give a positive side in pixels, or an [h, w] pair of them",
        "e.g. 32 or [16,32]",
    )


def size_name(size) -> str:
    """``16`` for a square, ``16x32`` (height x width) otherwise: the size in metric tags
    (``test/acc@res16x32``), table columns and messages. ``size``: anything :func:`as_hw` takes."""
    h, w = as_hw(size)
    return str(h) if h == w else f"{h}x{w}"


def parse_name(text: str) -> HW:
    """The inverse of :func:`size_name`: ``"16"`` -> ``(16, 16)``, ``"16x32"`` -> ``(16, 32)``
    (a tag's or a table column's size); a ``ValueError`` for anything else."""
    h, sep, w = str(text).strip().partition("x")
    if not h.isdigit() or (sep and not w.isdigit()):
        raise ValueError(f"{text!r} is not a size name such as 16 or 16x32")
    return (int(h), int(w) if sep else int(h))


def plain_size(size) -> int | HW:
    """The side of a square, ``(h, w)`` otherwise: a size as the data pipeline hands it around (a
    training batch's size tag, the data module's ``train_sizes``), equal to the option for a side."""
    h, w = as_hw(size)
    return h if h == w else (h, w)


def compact(size) -> int | str:
    """The side of a square, ``"HxW"`` otherwise: the size as a run's hash and a report's columns
    hold it, so that ``[32, 32]`` and ``32`` are the same run and a square reads as before."""
    h, w = as_hw(size)
    return h if h == w else f"{h}x{w}"


def size_order(size) -> tuple[int, int, int]:
    """Sort key of a size (a side, a pair or a :func:`size_name`): by pixel count (so by tokens),
    then height: ``16 < 16x32 < 32x16 < 24 < 32``. Squares keep their order by side."""
    h, w = parse_name(size) if isinstance(size, str) else as_hw(size)
    return (h * w, h, w)


def column_order(size) -> tuple[bool, int, bool, int]:
    """Sort key of a size as a table column or a plot's tick (a side, a pair or a :func:`size_name`):
    the squares first, by side, then the other sizes by pixel count, wide (h < w) before tall:
    ``16 < 24 < 32 < 16x32 < 32x16``. The squares read as one series; a non-square size never
    sits between two of them."""
    h, w = parse_name(size) if isinstance(size, str) else as_hw(size)
    return (h != w, h * w, h > w, h)


#: ``eval.resolutions=auto``: the test sizes as ratios of the training size, from half to twice it
EVAL_RATIOS = (0.5, 0.75, 1, 1.25, 1.5, 2)


def token_grid(size, patch: int) -> HW:
    """The patch grid ``(h // patch, w // patch)`` of an image of ``size`` (a side or ``[h, w]``): rows, columns."""
    h, w = as_hw(size)
    return h // patch, w // patch


def tiles(h, w, ph, pw) -> bool:
    """Whether ``ph x pw`` patches tile an ``h x w`` image exactly: the one rule of patch divisibility.
    Plain arithmetic on positive sides, so it also runs on the symbolic sizes of a traced forward."""
    return h % ph == 0 and w % pw == 0


def patch_grid(size, patch, option: str = "size") -> HW:
    """The patch grid ``(rows, columns)`` of the image size ``size`` (anything :func:`as_hw` takes) cut into
    ``patch`` (a side or ``(ph, pw)``) patches. A size the patches do not tile raises :class:`UserError` naming
    ``option`` and the nearest sizes that they do."""
    h, w = as_hw(size, option)
    ph, pw = as_hw(patch, "model.patch_size")
    if tiles(h, w, ph, pw):
        return h // ph, w // pw
    rule = f"a multiple of model.patch_size={ph}" if ph == pw else f"a multiple of the patch size {ph}x{pw}"
    lows, highs = nearest_multiples(h, ph), nearest_multiples(w, pw)
    if h == w and ph == pw:  # a square is written as its side
        raise UserError(option, f"{h} is not {rule}", f"e.g. {' or '.join(map(str, lows))}")
    good = " or ".join(f"[{a},{b}]" for a, b in sorted({(lows[0], highs[0]), (lows[-1], highs[-1])}))
    raise UserError(option, f"[{h}, {w}] is not {rule} on each side", f"e.g. {good}")


def nearest_multiples(side: int, step: int, least: int | None = None) -> list[int]:
    """The multiples of ``step`` (at least ``least``, default ``step``) on either side of ``side``,
    or ``[side]`` when it is one: the sizes a refusal offers as its fix."""
    least = step if least is None else least
    if side % step == 0 and side >= least:
        return [side]
    return sorted({max(least, side // step * step), max(least, (side // step + 1) * step)})


def default_resolutions(img_size, patch: int) -> list[int | list[int]]:
    """The sizes ``eval.resolutions=auto`` tests: :data:`EVAL_RATIOS` x the training size
    ``img_size`` (a side or ``[h, w]``), each side rounded to the nearest multiple of ``patch``
    (halves up), at least one patch, each size once, in order. A square is its side and another
    size an ``[h, w]`` list, as the option is written: ``[16, 24, 32, 40, 48, 64]`` for 4 px
    patches at 32 px, ``[16, 32, 48, 64]`` for 16 px patches there."""
    h, w = as_hw(img_size, "data.img_size")

    def near(side: float) -> int:
        return patch * max(1, math.floor(side / patch + 0.5))

    sizes: list[int | list[int]] = []
    for ratio in EVAL_RATIOS:
        size = plain_size((near(ratio * h), near(ratio * w)))
        size = list(size) if isinstance(size, tuple) else size
        if size not in sizes:
            sizes.append(size)
    return sizes


def equivalent_side(size) -> float:
    """``sqrt(h * w)``: the side of the square with as many pixels (and tokens), where a plot with a
    numeric size axis puts a non-square size (a square stays at its side)."""
    h, w = parse_name(size) if isinstance(size, str) else as_hw(size)
    return float(h) if h == w else (h * w) ** 0.5


#: how a plot with a numeric size axis marks a size by its shape: a square on its line, a wide
#: (h < w) or tall (h > w) one as a triangle pointing along its long side, not joined to the line
MARKERS = {"square": "o", "wide": ">", "tall": "^"}


def orientation(size) -> str:
    """``square``, ``wide`` (h < w) or ``tall`` (h > w): the key of :data:`MARKERS`."""
    h, w = parse_name(size) if isinstance(size, str) else as_hw(size)
    return "square" if h == w else "wide" if h < w else "tall"
