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
"""

from __future__ import annotations

import torch

CLASSES = ("red below blue, right half", "red below blue, left half", "red above blue, right half",
           "red above blue, left half")


def make_shapes(num: int, img_size: int = 32, cell: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(num, 3, img_size, img_size) uint8 images and (num,) labels in [0, 4)."""
    if img_size % cell:
        raise ValueError(f"data.img_size={img_size} must be a multiple of data.cell={cell}")
    g = torch.Generator().manual_seed(seed)
    cells = img_size // cell
    images = torch.randint(0, 110, (num, 3, img_size, img_size), generator=g, dtype=torch.uint8)
    # two cells in different rows and columns
    r1, c1 = torch.randint(0, cells, (num,), generator=g), torch.randint(0, cells, (num,), generator=g)
    r2 = (r1 + torch.randint(1, cells, (num,), generator=g)) % cells
    c2 = (c1 + torch.randint(1, cells, (num,), generator=g)) % cells
    labels = 2 * (r1 < r2).long() + (c1 < cells // 2).long()
    red = torch.tensor([230, 30, 30], dtype=torch.int16)
    blue = torch.tensor([30, 30, 230], dtype=torch.int16)
    jitter = torch.randint(-25, 26, (num, 2, 3), generator=g, dtype=torch.int16)
    for i in range(num):
        for (r, c), color, j in (((r1[i], c1[i]), red, jitter[i, 0]), ((r2[i], c2[i]), blue, jitter[i, 1])):
            ys, xs = slice(r * cell, (r + 1) * cell), slice(c * cell, (c + 1) * cell)
            images[i, :, ys, xs] = (color + j).clamp(0, 255).to(torch.uint8)[:, None, None]
    return images, labels
