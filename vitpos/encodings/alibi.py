"""ALiBi: attention with linear biases (Press, Smith & Lewis, ICLR 2022).

No position parameters and nothing added to the tokens: head h adds
``-m_h * |i - j|`` to the logit of query i on key j, with the fixed geometric
slopes of :func:`functional.alibi_slopes` (1/2, 1/4, ..., 1/256 for 8 heads).

The paper is causal and writes the bias as ``-m_h * (i - j)`` for j <= i. We
build the symmetric form ``-m_h * |i - j|``: on the entries a causal mask
leaves visible (j <= i) it is the same number, and in a bidirectional model it
penalizes distance in both directions alike. Mind what that means: the
symmetric bias carries no *direction*, so a bidirectional model with ALiBi
alone cannot tell i - k from i + k (it cannot solve ``copy_offset``); use it
with ``model.causal=true``, as the paper does.

Any length works as is (the paper's point), hence the single strategy
``extrapolate``. Prefix (class) tokens, if any, get no bias.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import EncodingContext, Grid, PositionalEncoding, cached_table, register
from .functional import alibi_slopes


def alibi_bias(slopes: torch.Tensor, n: int) -> torch.Tensor:
    """(H, n, n) float32 bias -slope_h * |i - j| for a sequence of n tokens."""
    pos = torch.arange(n, dtype=torch.float32)
    distance = (pos[:, None] - pos[None, :]).abs()  # (n, n), |i - j|
    return -slopes.float()[:, None, None] * distance[None]  # (H, n, n)


@register
class ALiBi(PositionalEncoding):
    """Linear distance penalty on the attention logits, one slope per head."""

    name = "alibi"
    grid_dims = (1,)
    strategies = ("extrapolate",)

    def __init__(self, ctx: EncodingContext, strategy: str | None = None):
        super().__init__(ctx, strategy)
        self.register_buffer("slopes", alibi_slopes(ctx.num_heads), persistent=False)  # (H,)
        self._cache: dict[tuple, torch.Tensor] = {}

    def attention_bias(self, grid: Grid, block: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """(H, P + N, P + N), the same for every block; cached per length/device/dtype."""
        (n,) = grid
        key = (n, str(device), dtype)

        def build() -> torch.Tensor:
            bias = alibi_bias(self.slopes.cpu(), n)
            p = self.num_prefix_tokens
            if p:
                bias = F.pad(bias, (p, 0, p, 0))  # prefix rows/columns: no bias
            return bias.to(device=device, dtype=dtype)

        return cached_table(self._cache, key, build)

    def no_weight_decay(self) -> set[str]:
        return set()  # no parameters

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, slopes={[round(s, 5) for s in self.slopes.tolist()]}"
