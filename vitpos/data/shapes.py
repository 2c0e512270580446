"""``data=shapes``: a generated image set whose label is *where* things are.

Each image is noise with one red and one blue square, each filling one cell of
a grid aligned with the patches. The label has two bits (4 classes): is the
red square *above the blue one* (a relative property, which relative
encodings such as RoPE and relative bias see directly) and is it *in the left
half of the image* (an absolute property, which absolute tables see directly).
Every image holds the same kinds of patches whatever its label, so a model
blind to position (a ViT without encoding and with average pooling) is at
chance, 25%; an encoding that sees either kind of position gets past 50%.
Horizontal flips change the label: the data config turns them off.

Any resolution, natively: the layout (which cells hold the squares,
their colours, hence the label) is fixed by the seed and the grid of cells
(``img_size // cell``), so ``make_shapes(..., size=S)`` draws the *same* images
at S px, each cell ``S / cells`` px wide, with sharp edges and new background
noise (seeded by ``(seed, S)``): extrapolation tests on real detail, never a
resampled 32-px image. Sizes may be ``[h, w]`` pairs (:func:`vitpos.sizes.as_hw`): a grid of
``h // cell`` rows and ``w // cell`` columns of cells, drawn at any ``[H, W]`` that holds a whole
number of pixels per cell on each axis (cells then stretch: a 32-px layout drawn at 16x32).

Which sizes the generator can use is written once, here: :func:`check_layout` (``data.img_size``
and ``data.cell``: at least :data:`MIN_CELLS` whole cells on each side, since the two squares sit
in different rows and columns), which the data module's constructor runs
(:func:`vitpos.data.options.check_image_data`), and :func:`check_drawable` (a size to draw that
layout at: a whole number of pixels per cell), which the config check runs on ``eval.resolutions``
(:mod:`vitpos.checks.data`); :func:`make_shapes` runs both on its own arguments. The module is free
of torch until :func:`make_shapes` draws. (``data.train_sizes`` are not drawn: training batches are
resized from ``data.img_size``, so any size the patches tile will do.)
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from vitpos.errors import UserError
from vitpos.sizes import HW, as_hw, nearest_multiples

if TYPE_CHECKING:
    import torch

CLASSES = ("red below blue, right half", "red below blue, left half", "red above blue, right half",
           "red above blue, left half")  # fmt: skip
RED = (230, 30, 30)
BLUE = (30, 30, 230)
#: the fewest cells along each side of a layout: the red and the blue square sit in different rows
#: and in different columns
MIN_CELLS = 2


def _shown(h: int, w: int, side: bool) -> str:
    """A size option's value as the user wrote it (``side``: as one side): ``4`` or ``[4, 32]``."""
    return str(h) if side else f"[{h}, {w}]"


def _written(h: int, w: int, side: bool) -> str:
    """``(h, w)`` written as an option given as one side (``side``) or a pair was: ``32`` or ``[h,w]``."""
    return str(h) if side and h == w else f"[{h},{w}]"


def _examples(h: list[int], w: list[int], side: bool) -> str:
    """``32 or 40`` / ``[16,32] or [16,40]``: the sizes nearest a size (per-axis choices ``h``, ``w``)."""
    pairs = sorted({(h[0], w[0]), (h[-1], w[-1])})
    return " or ".join(dict.fromkeys(_written(a, b, side) for a, b in pairs))


def smallest_img_size(cell: int, patch: int | None = None) -> int:
    """The smallest side of ``data.img_size`` for ``data.cell`` (and ``model.patch_size``, when
    known): :data:`MIN_CELLS` cells, rounded up to a multiple of both the cell and the patch."""
    step = math.lcm(cell, patch or 1)
    return -(-MIN_CELLS * cell // step) * step


def check_layout(img_size: HW, cell: int) -> HW:
    """``(rows, cols)``: the grid of cells ``data.img_size`` (``(h, w)``, :func:`vitpos.sizes.as_hw`) holds at
    ``data.cell`` px a cell. Raises :class:`UserError` naming ``data.img_size`` when a side is not
    a whole number of cells or holds fewer than :data:`MIN_CELLS` (``torch.randint`` could not
    place the squares); the fix is the nearest size that works."""
    h, w = img_size
    if h % cell == 0 and w % cell == 0 and min(h, w) >= MIN_CELLS * cell:
        return h // cell, w // cell
    least, side = MIN_CELLS * cell, h == w  # a square is written as its side
    near_h, near_w = nearest_multiples(h, cell, least), nearest_multiples(w, cell, least)
    if h % cell or w % cell:
        raise UserError(
            "data.img_size",
            f"{_shown(h, w, side)} is not a multiple of data.cell={cell} on each side (data=shapes draws whole cells)",
            f"e.g. {_examples(near_h, near_w, side)}",
        )
    raise UserError(
        "data.img_size",
        f"{_shown(h, w, side)} is too small for data=shapes: {h // cell}x{w // cell} cells of data.cell={cell} px, "
        f"and its two squares need {MIN_CELLS} rows and {MIN_CELLS} columns of cells",
        f"the smallest is {least} px a side: data.img_size={_written(near_h[0], near_w[0], side)}",
    )


def can_draw(size: HW, img_size: HW, cell: int) -> bool:
    """Whether the layout of ``data.img_size`` (a valid one: :func:`check_layout`) can be drawn at
    ``size``: a whole number of pixels per cell on each axis. Both sizes are ``(h, w)``, converted once by
    their reader (:func:`vitpos.sizes.as_hw`)."""
    (h, w), (height, width) = img_size, size
    return height % (h // cell) == 0 and width % (w // cell) == 0


def check_drawable(size: HW, img_size: HW, cell: int, option: str = "eval.resolutions", patch: int | None = None) -> HW:
    """``size`` (``option``, ``(h, w)``) when the layout of ``data.img_size`` (a valid one: :func:`check_layout`)
    can be drawn at it (:func:`can_draw`); else a :class:`UserError` naming ``option`` whose fix is the nearest
    sizes that can (multiples of ``patch`` too, when the patch size is known)."""
    if can_draw(size, img_size, cell):
        return size
    (height, width), (h, w) = size, img_size
    rows, cols = h // cell, w // cell
    steps, side = (math.lcm(rows, patch or 1), math.lcm(cols, patch or 1)), height == width
    near = nearest_multiples(height, steps[0]), nearest_multiples(width, steps[1])
    need = f"a side that is a multiple of {rows}" if rows == cols else f"a height that is a multiple of {rows}"
    need += "" if rows == cols else f" and a width that is a multiple of {cols}"
    fix = "e.g. " + _examples(*near, side)
    if height < steps[0] or width < steps[1]:  # below the smallest: say so
        smallest = _written(*steps, side)
        fix = f"the smallest it can draw is {smallest}" + ("" if fix == f"e.g. {smallest}" else f"; {fix}")
    raise UserError(
        option,
        f"data=shapes cannot draw {_shown(height, width, side)} px images: its {rows}x{cols} cells (data.img_size="
        f"{_written(h, w, h == w)} / data.cell={cell}) need a whole number of pixels each, {need}",
        fix,
    )


def drawn(sizes: dict[str, HW], img_size: HW, cell: int, patch: int, refuse: bool) -> list[str]:
    """The options of ``sizes`` (option -> ``(h, w)``) whose size the layout of ``data.img_size`` can be drawn at
    (:func:`can_draw`); ``refuse``: the first it cannot is refused instead (:func:`check_drawable`, whose fix is
    sizes that ``patch`` tiles too). ``eval.resolutions=auto`` drops the others, a list given is refused."""
    kept = []
    for option, size in sizes.items():
        if can_draw(size, img_size, cell):
            kept.append(option)
        elif refuse:
            check_drawable(size, img_size, cell, option, patch)
    return kept


def make_shapes(num: int, img_size=32, cell: int = 4, seed: int = 0, size=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(num, 3, H, W) uint8 images and (num,) labels in [0, 4); (H, W) = ``size`` or ``img_size``
    (each a side or an ``[h, w]`` pair).

    ``img_size`` and ``cell`` fix the layout (``h // cell`` rows and ``w // cell`` columns of
    cells); ``size`` renders that layout at another resolution (a multiple of the cells on each
    axis). The labels do not depend on ``size``, and the images at ``size=img_size`` are those of
    the original generator, bit for bit (its draws keep their order: training noise, layouts,
    colour jitter). Sizes it cannot use raise :class:`UserError` (:func:`check_layout`,
    :func:`check_drawable`).
    """
    import torch

    from .memory import epoch_seed

    layout = as_hw(img_size, "data.img_size")
    rows, cols = check_layout(layout, cell)
    h, w = rows * cell, cols * cell
    height, width = (h, w) if size is None else check_drawable(as_hw(size, "eval.resolutions"), layout, cell)
    g = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 110, (num, 3, h, w), generator=g, dtype=torch.uint8)
    # two cells in different rows and columns
    r1, c1 = torch.randint(0, rows, (num,), generator=g), torch.randint(0, cols, (num,), generator=g)
    r2 = (r1 + torch.randint(1, rows, (num,), generator=g)) % rows
    c2 = (c1 + torch.randint(1, cols, (num,), generator=g)) % cols
    labels = 2 * (r1 < r2).long() + (c1 < cols // 2).long()
    jitter = torch.randint(-25, 26, (num, 2, 3), generator=g, dtype=torch.int16)
    if (height, width) != (h, w):  # other sizes: their own noise, from a generator apart from the layouts'
        square = height == width and rows == cols  # a square keeps the seed it always had
        key = (height, rows) if square else (height, rows, width, cols)
        noise = torch.Generator().manual_seed(epoch_seed(seed, *key))
        images = torch.randint(0, 110, (num, 3, height, width), generator=noise, dtype=torch.uint8)
    row_of = torch.arange(height) // (height // rows)  # (H,) the cell row of each pixel row
    col_of = torch.arange(width) // (width // cols)  # (W,) the cell column of each pixel column
    for k, ((r, c), color) in enumerate((((r1, c1), RED), ((r2, c2), BLUE))):
        rgb = (torch.tensor(color, dtype=torch.int16) + jitter[:, k]).clamp(0, 255).to(torch.uint8)  # (N, 3)
        inside = (row_of[None, :, None] == r[:, None, None]) & (col_of[None, None, :] == c[:, None, None])  # (N, H, W)
        images = torch.where(inside[:, None], rgb[:, :, None, None], images)  # (N, 3, H, W)
    return images, labels
