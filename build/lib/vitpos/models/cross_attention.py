"""Text-to-image cross-attention with one rotary encoding per modality.

Text queries live on a line (position m), image keys on a grid (row y,
column x). A logit between a text token and a patch cannot depend on an
"offset" between the two without a reference point in each frame, so each
modality also gets one coordinate in the *other* frame (a shared virtual
coordinate system, in the spirit of Qwen2-VL's M-RoPE):

- the image sits at a text position ``image_text_pos`` c (where it is
  inserted in the text; default 0, in front of the text);
- the text looks at the image from a 2D point ``text_anchor`` a (default the
  grid center).

The head is split in two: the first ``text_dim`` channels are 1D RoPE pairs
(spectrum of ``rope_1d``, base ``text_base``), the rest axial 2D RoPE pairs
(spectrum and layout of ``rope_2d``: first half of those pairs turn with x,
second half with y, base ``image_base``). Rotations:

    query (text token m):  text pairs by m,  image pairs by a
    key   (patch at p):    text pairs by c,  image pairs by p

RoPE makes each pair's contribution depend on the difference of the two
rotation angles, so the logit is a function of the contents, of the text
offset m - c and of the 2D offset p - a only. Hence the tested property:
shifting every text coordinate (m and c) by t and every 2D coordinate (p and
a) by (dy, dx) leaves the logits unchanged. Note that the shifts must include
the anchors: no logit can be invariant to moving the patches alone while
still telling patches apart by position.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from vitpos.encodings import functional as fn


def grid_coords(h: int, w: int, device=None) -> torch.Tensor:
    """(h*w, 2) float (y, x) coordinates of a row-major patch grid."""
    ys, xs = torch.meshgrid(torch.arange(h, device=device), torch.arange(w, device=device), indexing="ij")
    return torch.stack([ys.flatten(), xs.flatten()], -1).float()


class CrossModalRoPE(nn.Module):
    """Builds the two rotation tables (complex, (tokens, Dh/2)) described in the module docstring."""

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
        self.text_dim, self.image_dim = text_dim, image_dim
        self.register_buffer("text_freq", fn.rope_inv_freq(text_dim // 2, text_base), persistent=False)
        self.register_buffer("image_freq", fn.rope_inv_freq(image_dim // 4, image_base, step=4), persistent=False)

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


class TextImageCrossAttention(nn.Module):
    """Multi-head cross-attention: text tokens (queries) attend to image
    patches (keys, values), positions through :class:`CrossModalRoPE`."""

    def __init__(
        self,
        dim: int,
        num_heads: int,
        context_dim: int | None = None,
        text_dim: int | None = None,
        text_base: float = 10000.0,
        image_base: float = 100.0,
        qkv_bias: bool = True,
    ):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"dim={dim} is not divisible by num_heads={num_heads}")
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        context_dim = context_dim or dim
        self.q = nn.Linear(dim, dim, bias=qkv_bias)
        self.kv = nn.Linear(context_dim, 2 * dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.rope = CrossModalRoPE(self.head_dim, text_dim, text_base, image_base)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        return x.reshape(b, n, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, n, Dh)

    def qkv(self, text, image, grid, text_pos=None, patch_pos=None, image_text_pos=0.0, text_anchor=None):
        """Rotated q (B, H, n, Dh), rotated k and v (B, H, h*w, Dh)."""
        n, device = text.shape[1], text.device
        if text_pos is None:
            text_pos = torch.arange(n, device=device, dtype=torch.float32)
        if patch_pos is None:
            patch_pos = grid_coords(*grid, device=device)  # (h*w, 2)
        if text_anchor is None:
            text_anchor = torch.tensor([(grid[0] - 1) / 2, (grid[1] - 1) / 2], device=device)  # grid center
        if patch_pos.shape[0] != image.shape[1]:
            raise ValueError(f"{image.shape[1]} image tokens but {patch_pos.shape[0]} patch positions (grid {grid})")
        q = self._heads(self.q(text))
        k, v = self._kv(image)
        q = fn.apply_rotary(q, self.rope.query_rotation(text_pos, torch.as_tensor(text_anchor, device=device)))
        k = fn.apply_rotary(k, self.rope.key_rotation(patch_pos, image_text_pos))
        return q, k, v

    def _kv(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, m, _ = image.shape
        kv = self.kv(image).reshape(b, m, 2, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)  # (2, B, H, M, Dh)
        return kv[0], kv[1]

    def logits(self, text, image, grid, **positions) -> torch.Tensor:
        """Pre-softmax attention logits (B, H, n, h*w)."""
        q, k, _ = self.qkv(text, image, grid, **positions)
        return q @ k.transpose(-2, -1) * self.head_dim**-0.5

    def forward(self, text, image, grid, key_padding_mask=None, **positions) -> torch.Tensor:
        """text (B, n, D), image (B, h*w, Dc) -> (B, n, D). key_padding_mask (B, h*w), True = ignore."""
        q, k, v = self.qkv(text, image, grid, **positions)
        mask = None if key_padding_mask is None else ~key_padding_mask[:, None, None, :]  # True = attend
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, n, Dh)
        b, n = text.shape[:2]
        return self.proj(out.transpose(1, 2).reshape(b, n, -1))
