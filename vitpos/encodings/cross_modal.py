"""Rotary encoding across two modalities: text queries, image keys.

Text queries live on a line (position m), image keys on a grid (row y, column x). A logit between a
text token and a patch cannot depend on an "offset" between the two without a reference point in
each frame, so each modality also gets one coordinate in the *other* frame (a shared virtual
coordinate system, in the spirit of Qwen2-VL's M-RoPE):

- the image sits at a text position ``image_text_pos`` c (where it is inserted in the text;
  default 0, in front of the text);
- the text looks at the image from a 2D point ``text_anchor`` a (default the grid center).

The head is split in two: the first ``text_dim`` channels are 1D RoPE pairs (spectrum of
``rope_1d``, base ``text_base``), the rest axial 2D RoPE pairs (spectrum and layout of ``rope_2d``:
first half of those pairs turn with x, second half with y, base ``image_base``). Rotations:

    query (text token m):  text pairs by m,  image pairs by a
    key   (patch at p):    text pairs by c,  image pairs by p

RoPE makes each pair's contribution depend on the difference of the two rotation angles, so the
logit is a function of the contents, of the text offset m - c and of the 2D offset p - a only:
shifting m and c by t and p and a by (dy, dx) leaves the logits unchanged (the tested property).

Provenance and checks: docs/encodings.md#cross-modal-rope
"""

from __future__ import annotations

import math

import torch
from torch import nn

from . import functional as fn


class CrossModalRoPE(nn.Module):
    """Builds the two rotation tables (complex, (tokens, Dh/2)) described in the module docstring.

    Rotate q by :meth:`query_rotation` and k by :meth:`key_rotation` with
    :func:`functional.apply_rotary` (``vitpos.models.cross_attention`` does).
    """

    def __init__(
        self, head_dim: int, text_dim: int | None = None, text_base: float = 10000.0, image_base: float = 100.0
    ):
        super().__init__()
        text_dim = head_dim // 2 if text_dim is None else text_dim
        image_dim = head_dim - text_dim
        if text_dim % 2 or image_dim % 4 or text_dim <= 0 or image_dim <= 0:
            raise ValueError(
                f"head dim {head_dim} must split into text_dim (even, > 0) and an image part divisible by 4; "
                f"got text_dim={text_dim}, image part {image_dim}"
            )
        for option, base in (("text_base", text_base), ("image_base", image_base)):
            if not (math.isfinite(base) and base > 0):
                raise ValueError(f"{option} must be a finite number > 0, got {base} (e.g. the default)")
        self.text_dim, self.image_dim = text_dim, image_dim
        self.register_buffer("text_freq", fn.rope_inv_freq(text_dim // 2, text_base), persistent=False)  # (Dt/2,)
        self.register_buffer("image_freq", fn.rope_inv_freq(image_dim // 4, image_base), persistent=False)  # (Di/4,)

    def _angles(self, line: torch.Tensor, plane: torch.Tensor) -> torch.Tensor:
        """line: (T,) text coordinates; plane: (T, 2) (y, x). Returns (T, Dh/2) float32 angles."""
        text = line.float()[:, None] * self.text_freq[None]  # (T, Dt/2)
        ax = plane[:, 1:].float() * self.image_freq[None]  # (T, Di/4), x
        ay = plane[:, :1].float() * self.image_freq[None]  # (T, Di/4), y
        return torch.cat([text, ax, ay], -1)  # (T, Dh/2)

    def query_rotation(self, text_pos: torch.Tensor, text_anchor: torch.Tensor) -> torch.Tensor:
        """text_pos (n,), text_anchor (2,) -> (n, Dh/2) complex."""
        plane = text_anchor.float().expand(len(text_pos), 2)
        return fn.rope_angles_to_complex(self._angles(text_pos, plane))

    def key_rotation(self, patch_pos: torch.Tensor, image_text_pos: float | torch.Tensor) -> torch.Tensor:
        """patch_pos (M, 2) (y, x), image_text_pos scalar -> (M, Dh/2) complex."""
        line = torch.as_tensor(image_text_pos, dtype=torch.float32, device=patch_pos.device).expand(len(patch_pos))
        return fn.rope_angles_to_complex(self._angles(line, patch_pos))
