"""ALiBi: attention with linear biases (Press, Smith & Lewis, ICLR 2022), on sequences and on images.

No position parameters and nothing added to the tokens: head h adds ``-m_h * |i - j|`` to the logit
of query i on key j, with the fixed geometric slopes of :func:`functional.alibi_slopes` (1/2, 1/4,
..., 1/256 for 8 heads). Prefix (class) tokens, if any, get no bias.

The paper is causal and writes ``-m_h * (i - j)`` for j <= i; the symmetric form built here is the
same number on every entry a causal mask leaves visible, and penalizes distance in both directions
alike. So it carries no *direction*: a bidirectional model with ALiBi alone cannot tell i - k from
i + k (it cannot solve ``copy_offset``); use it with ``model.causal=true``, as the paper does. Any
length works as is (the paper's point), hence the single strategy ``extrapolate``.

``alibi_2d`` carries the same slopes to images: ``-m_h * ||p_i - p_j||``, the Euclidean distance
between the centres of patches i and j in patches (the "2D-ALiBi" baseline of LookHere, Fuller et
al. 2024). It sees the offset (dy, dx) only through its length, so a mirrored or rotated grid gets
the same bias (``lookhere`` adds the directions). Deliberate difference from that baseline: every
head gets its own slope 2^(-8h/H), as Press et al., where the LookHere authors repeat four slopes.

Provenance and checks: docs/encodings.md#alibi-and-2d-alibi
"""

from __future__ import annotations

import torch

from .base import EncodingContext, Grid, GridCache, PositionalEncoding, register
from .functional import alibi_slopes, euclidean_distance_2d, pad_prefix


def alibi_bias(slopes: torch.Tensor, n: int) -> torch.Tensor:
    """(H, n, n) float32 bias -slope_h * |i - j| for a sequence of n tokens."""
    pos = torch.arange(n, dtype=torch.float32)
    distance = (pos[:, None] - pos[None, :]).abs()  # (n, n), |i - j|
    return -slopes.float()[:, None, None] * distance[None]  # (H, n, n)


def alibi_2d_bias(slopes: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """(H, N, N) float32 bias -slope_h * ||p_i - p_j|| on a row-major h x w patch grid."""
    return -slopes.float()[:, None, None] * euclidean_distance_2d(h, w)[None]  # (H, N, N)


@register
class ALiBi(PositionalEncoding):
    """Linear distance penalty on the attention logits, one slope per head."""

    name = "alibi"
    grid_dims = (1,)
    strategies = ("extrapolate",)

    def __init__(self, ctx: EncodingContext, strategy: str | None = None):
        super().__init__(ctx, strategy)
        self.register_buffer("slopes", alibi_slopes(ctx.num_heads), persistent=False)  # (H,)
        self._tables = GridCache()

    def bias_on(self, grid: Grid) -> torch.Tensor:
        """(H, N, N) float32 bias on the grid tokens (no prefix)."""
        (n,) = grid
        return alibi_bias(self.slopes.cpu(), n)

    def attention_bias(self, grid: Grid, block: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """(H, P + N, P + N), the same tensor for every block; cached per grid/device/dtype."""

        def build() -> torch.Tensor:
            bias = pad_prefix(self.bias_on(grid), self.num_prefix_tokens)  # prefix: no bias
            return bias.to(device=device, dtype=dtype)

        return self._tables.get(build, grid, device, dtype=dtype)

    def no_weight_decay(self) -> set[str]:
        return set()  # no parameters

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, slopes={[round(s, 5) for s in self.slopes.tolist()]}"


@register
class ALiBi2D(ALiBi):
    """ALiBi on the patch grid: head h adds ``-m_h * ||p_i - p_j||`` (Euclidean
    distance between patch centres, in patches), with the slopes of ``alibi``.

    No parameters; any grid works as is (strategy ``extrapolate``, the only
    one). The bias is built once per grid, device and dtype, and every block
    gets that same tensor. Class tokens are neither biased nor penalized.
    """

    name = "alibi_2d"
    grid_dims = (2,)

    def bias_on(self, grid: Grid) -> torch.Tensor:
        h, w = grid
        return alibi_2d_bias(self.slopes.cpu(), h, w)
