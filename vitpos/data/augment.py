"""Whole-batch tensor augmentation: no per-image PIL work in the training loop."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from vitpos.sizes import as_hw

from .options import POLICIES


def random_crop(
    images: torch.Tensor, padding: int | tuple[int, int], generator: torch.Generator | None = None
) -> torch.Tensor:
    """Pad by ``padding`` (zeros; a pair: ``(rows, columns)`` for a non-square image) and take one
    random HxW crop per image.

    images: (B, C, H, W). Implemented as a gather with per-image offsets, so the
    whole batch is cropped in one op.
    """
    py, px = (padding, padding) if isinstance(padding, int) else padding
    if py <= 0 and px <= 0:
        return images
    b, c, h, w = images.shape
    padded = F.pad(images, (px, px, py, py))  # (B, C, H+2py, W+2px)
    dy = torch.randint(0, 2 * py + 1, (b,), generator=generator, device=images.device)
    dx = torch.randint(0, 2 * px + 1, (b,), generator=generator, device=images.device)
    # two gathers with broadcast (stride-0) indices rather than one 4-index fancy index, which
    # materializes four (B, C, H, W) int64 index tensors (the figure: docs/performance.md)
    rows = (dy[:, None] + torch.arange(h, device=images.device))[:, None, :, None]  # (B, 1, H, 1)
    cols = (dx[:, None] + torch.arange(w, device=images.device))[:, None, None, :]  # (B, 1, 1, W)
    rows = rows.expand(b, c, h, w + 2 * px)
    return padded.gather(2, rows).gather(3, cols.expand(b, c, h, w))  # (B, C, H, W)


def random_hflip(images: torch.Tensor, p: float = 0.5, generator: torch.Generator | None = None) -> torch.Tensor:
    flip = torch.rand(images.shape[0], generator=generator, device=images.device) < p
    return torch.where(flip[:, None, None, None], images.flip(-1), images)


def normalize(images: torch.Tensor, mean, std) -> torch.Tensor:
    """uint8 (B, C, H, W) -> float normalized."""
    mean = torch.tensor(mean, device=images.device)[None, :, None, None]
    std = torch.tensor(std, device=images.device)[None, :, None, None]
    return (images.float() / 255.0 - mean) / std


def resize_images(images: torch.Tensor, size) -> torch.Tensor:
    """uint8 (N, C, H, W) -> uint8 (N, C, h, w), bicubic, antialiased when either side shrinks.
    ``size``: a side or ``(h, w)`` (:func:`vitpos.sizes.as_hw`); each axis is resized on its own,
    so one may shrink while the other grows."""
    h, w = as_hw(size)
    if tuple(images.shape[-2:]) == (h, w):
        return images
    shrink = h < images.shape[-2] or w < images.shape[-1]
    out = []
    for chunk in images.split(1024):
        x = F.interpolate(chunk.float(), size=(h, w), mode="bicubic", align_corners=False, antialias=shrink)
        out.append(x.round().clamp(0, 255).to(torch.uint8))
    return torch.cat(out)


# ------------------------------------------------------- per-image policies
def policy_transform(name: str, magnitude: int = 9, num_ops: int = 2):
    """The torchvision ``transforms.v2`` policy behind ``data.augment``, applied to uint8 tensors.

    - ``trivial``: TrivialAugmentWide (Müller & Hutter 2021): one random op, random strength.
    - ``randaugment``: RandAugment (Cubuk et al. 2020): ``num_ops`` ops at ``magnitude`` (of 31 bins).
    - ``none``: crop + flip only.
    """
    from torchvision.transforms import v2

    if name == "none":
        return None
    if name == "trivial":
        return v2.TrivialAugmentWide()
    if name == "randaugment":
        return v2.RandAugment(num_ops=num_ops, magnitude=magnitude)
    raise ValueError(f"unknown data.augment {name!r}; valid: {', '.join(POLICIES)}")


def per_image(images: torch.Tensor, transform) -> torch.Tensor:
    """Apply ``transform`` to each image of a uint8 (B, C, H, W) batch with its own random draw.

    torchvision's policies draw one op per call, so a call on the whole batch would give every
    image the same op; one call per (C, H, W) image keeps the policy as published. The draws come
    from torch's global generator, which ``EpochSeed`` reseeds each epoch (exact resume holds).
    """
    if transform is None:
        return images
    out = torch.empty_like(images)
    for i, image in enumerate(images):  # (C, H, W) uint8 each
        out[i] = transform(image)
    return out
