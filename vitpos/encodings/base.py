"""The one extension point: a positional encoding acting through three hooks.

Every encoding is a :class:`PositionalEncoding` registered by name. It may act

1. on the tokens: ``add_to_tokens`` before any prefix (class) token is
   concatenated (absolute tables), and ``after_block`` on the full sequence
   after chosen blocks (conditional encodings such as CPE);
2. on q and k after the heads are split: ``rotate_qk`` (RoPE);
3. as an additive bias on the attention logits: ``attention_bias`` (relative
   bias, ALiBi), handed to ``scaled_dot_product_attention`` as a float mask.

Every hook receives the token ``grid``: ``(n,)`` for sequences, ``(h, w)`` for
images. An encoding meeting a grid it was not trained on either handles it by
its named ``strategy`` or raises an error that names the option to change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

Grid = tuple[int, ...]


def cached_table(cache: dict, key: tuple, build) -> torch.Tensor:
    """``cache[key]``, built by ``build()`` on a miss.

    Derived tables (rotations, fixed tables, index maps) hold no gradient, and are
    built outside inference mode: a table first built during evaluation (Lightning
    validates under ``torch.inference_mode``) would otherwise be an inference
    tensor, which a later training step cannot save for its backward pass."""
    table = cache.get(key)
    if table is None:
        with torch.inference_mode(False), torch.no_grad():
            table = cache[key] = build()
    return table


@dataclass(frozen=True)
class EncodingContext:
    """The geometry of the model an encoding is built for."""

    dim: int  # token width D
    num_heads: int  # attention heads H
    depth: int  # number of blocks
    grid: Grid  # training token grid: (n,) or (h, w)
    num_prefix_tokens: int = 0  # class tokens in front of the grid tokens

    @property
    def head_dim(self) -> int:
        return self.dim // self.num_heads


class PositionalEncoding(nn.Module):
    """Base class: every hook is a no-op until a subclass overrides it."""

    name: ClassVar[str] = "base"
    #: strategies for grids other than the training grid; the first is the default.
    strategies: ClassVar[tuple[str, ...]] = ("none",)
    #: grid dimensionalities this encoding supports (1 = sequences, 2 = images).
    grid_dims: ClassVar[tuple[int, ...]] = (1, 2)

    def __init__(self, ctx: EncodingContext, strategy: str | None = None):
        super().__init__()
        if len(ctx.grid) not in self.grid_dims:
            kind = {1: "sequence", 2: "image"}
            allowed = " or ".join(kind[d] for d in self.grid_dims)
            raise ValueError(
                f"encoding '{self.name}' works on {allowed} grids, got the grid {ctx.grid}; "
                "pick another encoding for this task"
            )
        self.ctx = ctx
        self.train_grid: Grid = tuple(ctx.grid)
        self.num_prefix_tokens = ctx.num_prefix_tokens
        self.strategy = strategy or self.strategies[0]

    # ------------------------------------------------------------------ strategy
    @property
    def strategy(self) -> str:
        return self._strategy

    @strategy.setter
    def strategy(self, value: str) -> None:
        if value not in self.strategies:
            raise ValueError(
                f"unknown strategy '{value}' for encoding '{self.name}'; "
                f"valid: {', '.join(self.strategies)} (set encoding.strategy=...)"
            )
        self._strategy = value

    # --------------------------------------------------------------------- hooks
    def add_to_tokens(self, x: torch.Tensor, grid: Grid) -> torch.Tensor:
        """x: (B, N, D) grid tokens, no prefix token yet. Returns (B, N, D)."""
        return x

    def after_block(self, x: torch.Tensor, grid: Grid, block: int) -> torch.Tensor:
        """x: (B, P + N, D) after block ``block``, prefix tokens included."""
        return x

    def rotate_qk(self, q: torch.Tensor, k: torch.Tensor, grid: Grid, block: int) -> tuple[torch.Tensor, torch.Tensor]:
        """q, k: (B, H, P + N, Dh) in block ``block``. Returns rotated (q, k)."""
        return q, k

    def attention_bias(self, grid: Grid, block: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor | None:
        """Additive logit bias (H, P + N, P + N) for block ``block``, or None."""
        return None

    # ------------------------------------------------------------------ helpers
    def no_weight_decay(self) -> set[str]:
        """Names (relative to this module) of parameters excluded from weight decay.

        Position tables and frequencies are excluded by default, as in timm.
        """
        return {name for name, _ in self.named_parameters()}

    def extra_repr(self) -> str:
        return f"train_grid={self.train_grid}, strategy={self.strategy}"


# ----------------------------------------------------------------------- registry
_REGISTRY: dict[str, type[PositionalEncoding]] = {}


def register(cls: type[PositionalEncoding]) -> type[PositionalEncoding]:
    """Class decorator: make ``cls`` constructible by its ``name``."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"encoding name '{cls.name}' is registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def list_encodings(grid_dims: int | None = None) -> list[str]:
    """Registered names, sorted; only those supporting ``grid_dims`` if given."""
    return sorted(name for name, cls in _REGISTRY.items() if grid_dims is None or grid_dims in cls.grid_dims)


def get_encoding_class(name: str) -> type[PositionalEncoding]:
    if name not in _REGISTRY:
        raise KeyError(
            f"unknown encoding '{name}'; valid names: {', '.join(list_encodings())} "
            "(set encoding=<name>, or encoding.parts=[a,b] with encoding=combo)"
        )
    return _REGISTRY[name]


def create_encoding(name: str, ctx: EncodingContext, **options) -> PositionalEncoding:
    """Build the encoding ``name`` for the model geometry ``ctx``.

    Unknown names raise a ``KeyError`` that lists the valid ones; unknown options
    raise a ``TypeError`` naming the options the encoding takes.
    """
    cls = get_encoding_class(name)
    try:
        return cls(ctx, **options)
    except TypeError as err:
        from vitpos.validate import accepted_options  # follows **kw up the class's bases

        params = accepted_options(cls)
        unknown = sorted(set(options) - set(params)) or sorted(options)
        raise TypeError(
            f"unknown options {unknown} for encoding '{name}': {err}; valid options: {', '.join(params)}"
        ) from err
