"""Text-to-image cross-attention with one rotary encoding per modality.

Text queries live on a line, image keys on a grid; :class:`CrossModalRoPE`
(``vitpos/encodings/cross_modal.py``, whose docstring gives the math: a
shared virtual coordinate system in the spirit of Qwen2-VL's M-RoPE) rotates
them so that a logit depends on the contents, the text offset and the 2D
offset only.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from vitpos.encodings import CrossModalRoPE
from vitpos.encodings import functional as fn
from vitpos.encodings.functional import grid_coords

__all__ = ["CrossModalRoPE", "TextImageCrossAttention", "grid_coords"]


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
