"""Reference forms the encodings are checked against: the peers of ``bench/rope.py`` and
the references of the RoPE tests (not part of ``vitpos``)."""

from __future__ import annotations

import torch


def rotate_half_reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The textbook rotate-half form x*cos + rotate_half(x)*sin (GPT-NeoX, HF's ``rotate_half``).

    cos, sin: (..., N, Dh/2), pairs (i, i + Dh/2).
    """
    x1, x2 = x.chunk(2, dim=-1)
    cos, sin = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin
