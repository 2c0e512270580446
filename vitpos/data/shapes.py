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
resampled 32-px image.
"""

from __future__ import annotations

import torch

from .memory import epoch_seed

CLASSES = ("red below blue, right half", "red below blue, left half", "red above blue, right half",
           "red above blue, left half")  # fmt: skip
RED = (230, 30, 30)
BLUE = (30, 30, 230)


def make_shapes(
    num: int, img_size: int = 32, cell: int = 4, seed: int = 0, size: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(num, 3, S, S) uint8 images and (num,) labels in [0, 4); S = ``size`` or ``img_size``.

    ``img_size`` and ``cell`` fix the layout (``img_size // cell`` cells a side); ``size`` renders
    that layout at another resolution (a multiple of the number of cells). The labels do not
    depend on ``size``, and the images at ``size=img_size`` are those of the original generator,
    bit for bit (its draws keep their order: training noise, layouts, colour jitter).
    """
    if img_size % cell:
        raise ValueError(f"data.img_size={img_size} must be a multiple of data.cell={cell}")
    cells = img_size // cell
    size = img_size if size is None else int(size)
    if size < cells or size % cells:
        raise ValueError(
            f"data=shapes cannot draw {size} px images: its {cells}x{cells} cells (data.img_size={img_size} / "
            f"data.cell={cell}) need a size that is a multiple of {cells}; "
            f"pick eval.resolutions (or data.train_sizes) among multiples of {cells}"
        )
    g = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 110, (num, 3, img_size, img_size), generator=g, dtype=torch.uint8)
    # two cells in different rows and columns
    r1, c1 = torch.randint(0, cells, (num,), generator=g), torch.randint(0, cells, (num,), generator=g)
    r2 = (r1 + torch.randint(1, cells, (num,), generator=g)) % cells
    c2 = (c1 + torch.randint(1, cells, (num,), generator=g)) % cells
    labels = 2 * (r1 < r2).long() + (c1 < cells // 2).long()
    jitter = torch.randint(-25, 26, (num, 2, 3), generator=g, dtype=torch.int16)
    if size != img_size:  # other sizes: their own noise, from a generator apart from the layouts'
        noise = torch.Generator().manual_seed(epoch_seed(seed, size, cells))
        images = torch.randint(0, 110, (num, 3, size, size), generator=noise, dtype=torch.uint8)
    step = size // cells  # pixels a cell
    index = torch.arange(size) // step  # (S,) the cell row (or column) of each pixel row (or column)
    for k, ((r, c), color) in enumerate((((r1, c1), RED), ((r2, c2), BLUE))):
        rgb = (torch.tensor(color, dtype=torch.int16) + jitter[:, k]).clamp(0, 255).to(torch.uint8)  # (N, 3)
        inside = (index[None, :, None] == r[:, None, None]) & (index[None, None, :] == c[:, None, None])  # (N, S, S)
        images = torch.where(inside[:, None], rgb[:, :, None, None], images)  # (N, 3, S, S)
    return images, labels
