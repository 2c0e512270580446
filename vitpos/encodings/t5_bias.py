"""T5's bucketed relative position bias (Raffel et al., JMLR 2020), for sequences.

A learned scalar per head and *bucket* of the offset ``j - i`` (key minus
query) is added to the logits. Small distances get a bucket each; larger ones
share logarithmically wider buckets up to ``max_distance``, beyond which every
distance falls in the last bucket. Hence any length works without a strategy:
distances never seen in training reuse the saturated bucket.

Mind the catch: a bucket only learns from distances seen in training. With
``max_distance`` beyond the training length, the far buckets keep their
initial values while the near-far ones learn to be negative, and longer
inputs then leak attention to far tokens (copy_offset trained at length 32:
accuracy at length 64 drops to about 0.5 with max_distance 128, stays about
0.98 with 16). T5 pairs 128 with 512-token inputs; keep max_distance well
inside the training length.

With ``bidirectional`` (encoder), half the buckets are for keys after the
query, half for keys before or at it; without (decoder, causal), all buckets
are for past keys and future keys share bucket 0 (they are masked anyway).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .base import EncodingContext, Grid, GridCache, OptionError, PositionalEncoding, register
from .functional import pad_prefix


def t5_relative_bucket(
    offset: torch.Tensor, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True
) -> torch.Tensor:
    """Bucket (long, same shape) of each key-minus-query ``offset``.

    Within one direction, of ``b`` buckets (``num_buckets``, halved when
    bidirectional) the first ``b // 2`` hold the distances 0 .. b//2 - 1
    exactly; distance d >= b//2 goes to ``b//2 + floor(log(d / (b//2)) /
    log(max_distance / (b//2)) * (b - b//2))``, capped at b - 1. In the
    bidirectional case, positive offsets (keys after the query) add b.
    """
    offset = offset.long()
    if bidirectional:
        buckets = num_buckets // 2
        direction = (offset > 0).long() * buckets  # keys after the query use the upper half
        distance = offset.abs()
    else:
        buckets = num_buckets
        direction = torch.zeros_like(offset)
        distance = (-offset).clamp(min=0)  # past keys only; the future maps to 0
    exact = buckets // 2
    if exact < 1 or max_distance <= exact:
        raise ValueError(
            f"t5 buckets need num_buckets >= {4 if bidirectional else 2} and max_distance > {exact}, "
            f"got num_buckets={num_buckets}, max_distance={max_distance}"
        )
    log_ratio = torch.log(distance.float().clamp(min=1) / exact) / math.log(max_distance / exact)
    far = exact + (log_ratio * (buckets - exact)).long()  # floor (log_ratio >= 0 where used)
    far = far.clamp(max=buckets - 1)
    return direction + torch.where(distance < exact, distance, far)


@register
class T5RelativeBias1D(PositionalEncoding):
    """Learned (num_buckets, H) bias table, one shared by all blocks by default
    (``shared=True``, as T5) or one per block. Prefix tokens get no bias."""

    name = "rel_bias_1d"
    grid_dims = (1,)
    strategies = ("extrapolate",)

    def __init__(
        self,
        ctx: EncodingContext,
        strategy: str | None = None,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = True,
        shared: bool = True,
        init_std: float = 0.02,
    ):
        super().__init__(ctx, strategy)
        try:
            t5_relative_bucket(torch.zeros(1), num_buckets, max_distance, bidirectional)  # validate early
        except ValueError as err:
            raise OptionError(
                "num_buckets", f"{err} (set encoding.num_buckets=... and encoding.max_distance=...)"
            ) from None
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.bidirectional, self.shared = bidirectional, shared
        tables = 1 if shared else ctx.depth
        self.tables = nn.Parameter(torch.randn(tables, num_buckets, ctx.num_heads) * init_std)  # (T, buckets, H)
        self._tables = GridCache()

    def bucket_index(self, n: int, device: torch.device) -> torch.Tensor:
        """(n, n) bucket of every (query, key) pair, cached per length/device."""

        def build() -> torch.Tensor:
            pos = torch.arange(n)
            offset = pos[None, :] - pos[:, None]  # (n, n), key - query
            return t5_relative_bucket(offset, self.num_buckets, self.max_distance, self.bidirectional).to(device)

        return self._tables.get(build, (n,), device)

    def attention_bias(self, grid: Grid, block: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        (n,) = grid
        table = self.tables[0 if self.shared else block]  # (buckets, H)
        bias = table[self.bucket_index(n, device)].permute(2, 0, 1)  # (H, n, n)
        return pad_prefix(bias, self.num_prefix_tokens).to(dtype)  # prefix rows/columns: no bias

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, num_buckets={self.num_buckets}, max_distance={self.max_distance}, "
            f"bidirectional={self.bidirectional}, shared={self.shared}"
        )
