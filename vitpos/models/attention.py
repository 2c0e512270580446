"""Multi-head self-attention and a pre-norm block that route through the encoding hooks."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from timm.layers import DropPath, Mlp
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from vitpos.encodings import Grid, OptionError, PositionalEncoding


def build_attention_mask(
    bias: torch.Tensor | None,
    key_padding_mask: torch.Tensor | None,
    causal: bool,
    n: int,
    device: torch.device,
    dtype: torch.dtype,
) -> torch.Tensor | None:
    """One float mask for SDPA: position bias (H, N, N) + causal + padding.

    key_padding_mask: (B, N) bool, True at padding. Returns None, (1, H, N, N),
    (N, N) or (B, H|1, N, N); masked entries hold the dtype's most negative
    value rather than -inf, so no row turns into NaN.
    """
    mask = bias
    neg = torch.finfo(dtype).min
    if causal:
        future = torch.ones(n, n, dtype=torch.bool, device=device).triu(1)  # (N, N)
        mask = (mask if mask is not None else torch.zeros(n, n, device=device, dtype=dtype)).masked_fill(future, neg)
    if key_padding_mask is not None:
        base = mask if mask is not None else torch.zeros(n, n, device=device, dtype=dtype)
        if base.dim() == 2:
            base = base[None]
        mask = base[None].masked_fill(key_padding_mask[:, None, None, :], neg)  # (B, H|1, N, N)
    elif mask is not None and mask.dim() == 3:
        # (1, H, N, N): PyTorch's CPU flash kernel takes a 4D float mask but not a 3D one, which
        # falls back to the math path (the figure: docs/performance.md, why the kernels are written as they are)
        mask = mask[None]
    return mask


def mask_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype q and k reach SDPA in: autocast's dtype when autocast is on for
    ``x``'s device (the residual stream stays float32, the q/k projections do
    not), else ``x.dtype``. Building the bias in it once per forward spares
    SDPA a cast of the mask in every block."""
    kind = x.device.type
    if torch.is_autocast_enabled(kind):
        return torch.get_autocast_dtype(kind)
    return x.dtype


def check_heads(dim: int, num_heads: int) -> None:
    """The width must split into ``num_heads`` equal heads: an :class:`OptionError` naming ``dim``
    otherwise, ``model.dim`` when a model's constructor raises it (the models call this before they
    build their encoding, whose own head-width rules assume it)."""
    if num_heads < 1 or dim % num_heads:
        raise OptionError("dim", f"{dim} is not a multiple of model.num_heads={num_heads}",
                          fix="change model.dim or model.num_heads")  # fmt: skip


class Attention(nn.Module):
    """Multi-head attention through ``scaled_dot_product_attention``.

    RoPE-style encodings rotate q and k after the heads are split; bias-style
    encodings add a float mask to the logits.
    """

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool = True, attn_drop: float = 0.0, proj_drop: float = 0.0):
        super().__init__()
        check_heads(dim, num_heads)
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.attn_drop, self.proj_drop = attn_drop, nn.Dropout(proj_drop)

    def qkv_heads(self, x, grid, pe, block):
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)  # (3, B, H, N, Dh)
        q, k, v = qkv.unbind(0)
        q, k = pe.rotate_qk(q, k, grid, block)
        return q, k, v

    def forward(self, x, grid: Grid, pe: PositionalEncoding, block: int, mask: torch.Tensor | None = None):
        b, n, d = x.shape
        q, k, v = self.qkv_heads(x, grid, pe, block)
        drop = self.attn_drop if self.training else 0.0
        if q.device.type == "cpu" and q.dtype == torch.bfloat16:
            # PyTorch's CPU flash kernel in bf16 is slower than the math path at these shapes, while in
            # float32 flash is the faster one (the figures: docs/performance.md, bench/run.py step)
            with sdpa_kernel(SDPBackend.MATH):
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=drop)  # (B, H, N, Dh)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=drop)  # (B, H, N, Dh)
        return self.proj_drop(self.proj(out.transpose(1, 2).reshape(b, n, d)))

    def attention_probs(self, x, grid, pe, block, mask=None) -> torch.Tensor:
        """The softmax attention weights (B, H, N, N), computed explicitly (for
        pictures and for checking SDPA)."""
        q, k, _ = self.qkv_heads(x, grid, pe, block)
        # SDPA's scale 1/sqrt(width of q): also right for q/k widened with extra channels (pape)
        logits = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5  # (B, H, N, N)
        if mask is not None:
            logits = logits + mask
        return logits.softmax(-1)


class Block(nn.Module):
    """Pre-norm Transformer block with timm's ``Mlp`` and ``DropPath``."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4.0, drop_path: float = 0.0, dropout: float = 0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, num_heads, attn_drop=dropout, proj_drop=dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), drop=dropout)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()

    def forward(self, x, grid, pe, block, mask=None):
        x = x + self.drop_path(self.attn(self.norm1(x), grid, pe, block, mask))
        return x + self.drop_path(self.mlp(self.norm2(x)))


def block_masks(pe, grid, depth, n, device, dtype, key_padding_mask=None, causal=False) -> list:
    """One SDPA mask per block 0 .. depth-1 (None where nothing is masked), from the encoding's
    ``attention_bias``. Blocks that get the same bias tensor (a shared or cached bias, or none)
    share one mask, so padding and causal masking are applied once. Shared by vitpos's stacks and
    by timm models converted with ``vitpos.integrations.timm.apply_encoding``."""
    built: dict[int, tuple] = {}  # id(bias) -> (bias, mask); the bias is kept so its id stays unique
    masks = []
    for i in range(depth):
        bias = pe.attention_bias(grid, i, device, dtype)
        if id(bias) not in built:
            built[id(bias)] = (bias, build_attention_mask(bias, key_padding_mask, causal, n, device, dtype))
        masks.append(built[id(bias)][1])
    return masks


class EncoderStack(nn.Module):
    """The blocks of a Transformer encoder plus the position-encoding plumbing
    shared by the ViT and the sequence model: per-block attention masks built
    once per forward, and the ``after_block`` hook."""

    def __init__(self, dim, depth, num_heads, mlp_ratio=4.0, drop_path=0.0, dropout=0.0):
        super().__init__()
        rates = [drop_path * i / max(depth - 1, 1) for i in range(depth)]  # stochastic depth rule
        self.blocks = nn.ModuleList([Block(dim, num_heads, mlp_ratio, r, dropout) for r in rates])

    def masks(self, pe, grid, n, device, dtype, key_padding_mask=None, causal=False):
        """One SDPA mask per block: :func:`block_masks` for these blocks."""
        return block_masks(pe, grid, len(self.blocks), n, device, dtype, key_padding_mask, causal)

    def forward(self, x, grid, pe, key_padding_mask=None, causal=False, return_attention=False):
        masks = self.masks(pe, grid, x.shape[1], x.device, mask_dtype(x), key_padding_mask, causal)
        maps = []
        for i, (blk, mask) in enumerate(zip(self.blocks, masks)):
            if return_attention:
                maps.append(blk.attn.attention_probs(blk.norm1(x), grid, pe, i, mask))
            x = pe.after_block(blk(x, grid, pe, i, mask), grid, i)
        return (x, maps) if return_attention else x
