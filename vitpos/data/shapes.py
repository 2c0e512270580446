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
"""

from __future__ import annotations

import torch

from vitpos.sizes import as_hw

from .memory import epoch_seed

CLASSES = ("red below blue, right half", "red below blue, left half", "red above blue, right half",
           "red above blue, left half")  # fmt: skip
RED = (230, 30, 30)
BLUE = (30, 30, 230)


def make_shapes(num: int, img_size=32, cell: int = 4, seed: int = 0, size=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(num, 3, H, W) uint8 images and (num,) labels in [0, 4); (H, W) = ``size`` or ``img_size``
    (each a side or an ``[h, w]`` pair).

    ``img_size`` and ``cell`` fix the layout (``h // cell`` rows and ``w // cell`` columns of
    cells); ``size`` renders that layout at another resolution (a multiple of the cells on each
    axis). The labels do not depend on ``size``, and the images at ``size=img_size`` are those of
    the original generator, bit for bit (its draws keep their order: training noise, layouts,
    colour jitter).
    """
    (h, w), (height, width) = as_hw(img_size, "data.img_size"), as_hw(img_size if size is None else size)
    if h % cell or w % cell:
        raise ValueError(f"data.img_size={img_size} must be a multiple of data.cell={cell}")
    rows, cols = h // cell, w // cell
    if height < rows or height % rows or width < cols or width % cols:
        raise ValueError(
            f"data=shapes cannot draw {size} px images: its {rows}x{cols} cells (data.img_size={img_size} / "
            f"data.cell={cell}) need a size that is a multiple of {rows} (height) and {cols} (width); "
            f"pick eval.resolutions (or data.train_sizes) among such multiples"
        )
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
