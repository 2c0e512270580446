"""PaPE and PaPE-RI (Øhrstrøm et al. 2026, arXiv:2602.01418): parabolic, content-dependent logit biases.

Each query token i carries, per head, M parabolas over Δ = p_i - p_j: with M learned directions w_m
(W_p, per block and head) and a_i = softplus(W_a x_i) >= 0, b_i = W_b x_i from the query's content::

    (q_i . k_j - Δ^T A_i Δ + β_i . Δ) / sqrt(Dh),   A_i = sum_m a_im w_m w_m^T,  β_i = W_p^T b_i

a concave quadratic in Δ (translation invariant). PaPE-RI (``pape_ri``): one isotropic parabola per
head, ``-a_i s_h^2 ||Δ||^2`` with a fixed random s_h, invariant to rotations and reflections too. The
bias is written as extra q and k channels whose dot product is the bias (width 1 + P^2 + P)::

    q_i' = [q_i, β_i.p_i - p_i^T A_i p_i, -vec(A_i), 2 A_i p_i - β_i],   k_j' = [k_j, 1, vec(p_j p_j^T), p_j]

zero-padded to a multiple of 8 channels, q' scaled by sqrt(width / Dh) so that SDPA's default scale
gives the reference's logits; q and k come out wider, so it must be the last part of a ``combo``.

Conventions (the authors' code): positions are 1-based patch indices (x = column, y = row), the class
token at (0, 0) and biased like any token (``cls_position=origin``); W_p and the content projections
per block, nn.Linear's default init; M = ``parabolas`` = 50. Deliberate differences: a and b come from
the heads' concatenated queries q_i = W_q x_i + b_q, not from x_i (``rotate_qk`` sees q and k only);
positions centred (the same bias, smaller squares for bf16); ``cls_position=none`` gives zero rows and
columns; only W_p is excluded from weight decay; pure PyTorch in float32 instead of Triton kernels.

Provenance and checks: docs/encodings.md#pape-and-pape-ri
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .base import EncodingContext, Grid, GridCache, OptionError, PositionalEncoding, check_choice, register
from .functional import ALIGN_MODES, grid_positions

CLS_POSITIONS = ("origin", "none")
CHANNEL_MULTIPLE = 8  # q/k widths are padded to a multiple of 8, as the authors do for the attention kernels


def parabola_positions(grid: Grid, train_grid: Grid, interpolate: bool, align: str, prefix: int) -> torch.Tensor:
    """(P + N, len(grid)) float32 positions: the authors' 1-based (x, y) patch indices with
    prefix tokens at the origin, minus the mean patch position (the bias sees only differences).

    ``interpolate``: each axis mapped onto the trained range (position interpolation, ``align``)."""
    patches = 1 + grid_positions(grid, train_grid, interpolate, align).flip(-1)  # (N, P_axes): x = column, y = row
    pos = torch.cat([torch.zeros(prefix, patches.shape[1]), patches])  # (P + N, P_axes)
    return pos - patches.mean(0)


class _Parabolic(PositionalEncoding):
    """Shared by PaPE and PaPE-RI: the position tables, the widened q and k, the scale."""

    strategies = ("extrapolate", "interpolate")

    def __init__(
        self, ctx: EncodingContext, strategy: str | None = None, cls_position: str = "origin", align: str = "corners"
    ):
        super().__init__(ctx, strategy)
        self.cls_position = check_choice(self.name, "cls_position", cls_position, CLS_POSITIONS)
        self.align = check_choice(self.name, "align", align, ALIGN_MODES)
        self.axes = len(ctx.grid)  # P: position coordinates per token
        features = self.num_features()
        self.width = CHANNEL_MULTIPLE * math.ceil((ctx.head_dim + features) / CHANNEL_MULTIPLE)
        self.pad = self.width - ctx.head_dim - features
        self._tables = GridCache()

    def num_features(self) -> int:
        raise NotImplementedError

    def key_features(self, pos: torch.Tensor) -> torch.Tensor:
        """(T, E) extra key channels from positions (T, P)."""
        raise NotImplementedError

    def query_features(self, x: torch.Tensor, pos: torch.Tensor, block: int) -> torch.Tensor:
        """(B, T, H, E) float32 extra query channels from all heads' queries x (B, T, D)."""
        raise NotImplementedError

    def tables(self, grid: Grid, device: torch.device) -> tuple[torch.Tensor, ...]:
        """Grid-only parts, cached: positions (T, P), padded key channels (T, E + pad),
        and which tokens take part (T, 1, 1) (all but the prefix with ``cls_position=none``)."""

        def build():
            p = self.num_prefix_tokens
            pos = parabola_positions(tuple(grid), self.train_grid, self.strategy == "interpolate", self.align, p)
            active = torch.ones(pos.shape[0], 1, 1)
            if self.cls_position == "none":
                active[:p] = 0
            keys = F.pad(self.key_features(pos) * active[:, 0], (0, self.pad))  # (T, E + pad)
            return pos.to(device), keys.to(device), active.to(device)

        return self._tables.get(build, grid, device, self.strategy)

    def rotate_qk(self, q, k, grid, block):
        """q, k: (B, H, T, Dh) -> (B, H, T, width): the original channels, then the parabola's."""
        b, h, t, dh = q.shape
        if dh != self.ctx.head_dim:
            raise ValueError(
                f"encoding '{self.name}' widens q and k, so it must act last: got head dim {dh}, "
                f"expected {self.ctx.head_dim} (put it last in encoding.parts)"
            )
        pos, keys, active = self.tables(grid, q.device)
        scale = math.sqrt(self.width / dh)  # SDPA divides by sqrt(width); the logits must keep 1/sqrt(Dh)
        with torch.autocast(q.device.type, enabled=False):
            x = q.transpose(1, 2).reshape(b, t, h * dh).float()  # (B, T, D): all heads' queries per token
            extra = self.query_features(x, pos, block)  # (B, T, H, E) float32
            if self.cls_position == "none":
                extra = extra * active
            extra = F.pad(extra * scale, (0, self.pad)).transpose(1, 2).to(q.dtype)  # (B, H, T, E + pad)
        q = torch.cat([q * scale, extra], dim=-1)  # (B, H, T, width)
        k = torch.cat([k, keys.to(k.dtype).expand(b, h, t, -1)], dim=-1)  # (B, H, T, width)
        return q, k

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, cls_position={self.cls_position}, width={self.width}"


def softplus(z: torch.Tensor) -> torch.Tensor:
    """log(1 + e^z), z beyond 20 passed through, as the authors' Triton kernels compute it;
    here because ATen's CPU softplus (log1p) is unvectorized, far slower than exp + log
    (docs/performance.md, "Why the kernels are written as they are")."""
    return torch.where(z > 20, z, torch.log(1 + torch.exp(z.clamp(max=20))))


def _uniform(shape: tuple[int, ...], fan_in: int) -> torch.Tensor:
    """nn.Linear's default initialization: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    return (2 * torch.rand(shape) - 1) / math.sqrt(fan_in)


@register
class PaPE(_Parabolic):
    """Parabolic position encoding: concave parabolas per block and head (``parabolas`` of them)
    over learned directions of the relative position, curvature and tilt from the
    query's content. See the module docstring.

    Options: ``parabolas`` M (50, the authors' default); ``cls_position`` origin (the
    authors': the class token at (0, 0)) | none (zero bias rows/columns);
    ``strategy`` extrapolate (integer positions, the authors') | interpolate;
    ``align`` for interpolate (corners | ratio).
    """

    name = "pape"

    def __init__(self, ctx: EncodingContext, strategy: str | None = None, parabolas: int = 50, **kw):
        if isinstance(parabolas, bool) or not isinstance(parabolas, int) or parabolas < 1:
            raise OptionError(
                "parabolas", f"encoding.parabolas must be an integer >= 1, got {parabolas!r} (the authors' 50)"
            )
        super().__init__(ctx, strategy, **kw)
        self.parabolas = parabolas
        d, h, m, p = ctx.depth, ctx.num_heads, parabolas, self.axes
        self.directions = nn.Parameter(_uniform((d, h, m, p), fan_in=p))  # W_p per block: (depth, H, M, P)
        self.content = nn.Parameter(_uniform((d, 2, h * m, ctx.dim), fan_in=ctx.dim))  # (depth, a|b, H*M, D)

    def num_features(self) -> int:
        return 1 + self.axes**2 + self.axes

    def key_features(self, pos):
        outer = (pos[:, :, None] * pos[:, None, :]).flatten(1)  # (T, P*P): vec(p p^T)
        return torch.cat([torch.ones(pos.shape[0], 1), outer, pos], -1)  # (T, 1 + P^2 + P)

    def query_features(self, x, pos, block):
        (b, t, _), h, m, p = x.shape, self.ctx.num_heads, self.parabolas, self.axes
        w = self.directions[block].float()  # (H, M, P)
        w_a, w_b = self.content[block].float().unbind(0)  # (H*M, D) each
        w_beta = torch.einsum("hmp,hmd->hpd", w, w_b.view(h, m, -1)).reshape(h * p, -1)  # b folded onto positions
        pre = x @ torch.cat([w_a, w_beta]).T  # (B, T, H*M + H*P): one matmul for a and β = W_p^T b
        a, beta = softplus(pre[..., : h * m]), pre[..., h * m :].reshape(b, t, h, p)  # curvatures >= 0; tilts
        outer = (w[..., :, None] * w[..., None, :]).flatten(-2)  # (H, M, P*P): w_m w_m^T
        per_head = torch.einsum("hmc,hg->hmgc", outer, torch.eye(h, device=x.device)).reshape(h * m, h * p * p)
        curv = (a @ per_head).view(b, t, h, p * p)  # vec(A) = sum_m a_m vec(w_m w_m^T): (B, T, H, P*P)
        pt = pos[None, :, None, :]  # (1, T, 1, P)
        ap = (curv.view(b, t, h, p, p) * pt[..., None, :]).sum(-1)  # A p: (B, T, H, P)
        own = ((beta - ap) * pt).sum(-1, keepdim=True)  # β.p - p^T A p
        return torch.cat([own, -curv, 2 * ap - beta], -1)  # (B, T, H, 1 + P^2 + P)

    def no_weight_decay(self) -> set[str]:
        return {"directions"}

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, parabolas={self.parabolas}"


@register
class PaPERI(_Parabolic):
    """Rotation-invariant PaPE: per block and head one isotropic parabola
    -a_i s_h^2 ||Δ||^2, curvature a_i = softplus(w_h . q_i) from the query's content,
    s_h a fixed random scale. Options as ``pape``, without ``parabolas``."""

    name = "pape_ri"

    def __init__(self, ctx: EncodingContext, strategy: str | None = None, **kw):
        super().__init__(ctx, strategy, **kw)
        d, h, p = ctx.depth, ctx.num_heads, self.axes
        self.register_buffer("scales", (2 * torch.rand(d, h) - 1) / math.sqrt(p))  # s_h per block, not learned
        self.content = nn.Parameter(_uniform((d, h, ctx.dim), fan_in=ctx.dim))  # (depth, H, D)

    def num_features(self) -> int:
        return 2 + self.axes

    def key_features(self, pos):
        return torch.cat([torch.ones(pos.shape[0], 1), pos.square().sum(-1, keepdim=True), pos], -1)  # (T, 2 + P)

    def query_features(self, x, pos, block):
        a = softplus(x @ self.content[block].float().T)  # (B, T, H)
        c = (a * self.scales[block].float().square())[..., None]  # (B, T, H, 1): a s^2
        pt = pos[None, :, None, :]  # (1, T, 1, P)
        return torch.cat([-c * pt.square().sum(-1, keepdim=True), -c, 2 * c * pt], -1)  # (B, T, H, 2 + P)

    def no_weight_decay(self) -> set[str]:
        return set()  # no position parameter: the scales are a fixed buffer
