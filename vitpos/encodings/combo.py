"""Sums of encodings, e.g. RoPE-Mixed + a learned table (RoPE-ViT's "+APE" rows)."""

from __future__ import annotations

from torch import nn

from .base import EncodingContext, OptionError, PositionalEncoding, create_encoding, register


@register
class Combination(PositionalEncoding):
    """Applies every part's hooks in order; attention biases add up.

    ``parts`` are registry names; ``options`` maps a part's name to its
    options, e.g. ``{rope_2d_mixed: {base: 10}}``. Setting ``strategy`` sets it
    on every part that knows it.
    """

    name = "combo"
    strategies = ("default",)

    def __init__(
        self, ctx: EncodingContext, strategy: str | None = None, parts=("rope_2d_mixed", "learned_1d"), options=None
    ):
        super().__init__(ctx, None)
        options = dict(options or {})
        if len(parts) < 2 or len(set(parts)) != len(parts):
            raise OptionError(
                "parts", f"combo needs two or more distinct parts, got {list(parts)} (encoding.parts=[a,b])"
            )
        self.parts = nn.ModuleList([create_encoding(p, ctx, **dict(options.get(p, {}))) for p in parts])
        if strategy is not None:
            self.strategy = strategy

    @property
    def strategy(self) -> str:
        return "+".join(p.strategy for p in self.parts) if hasattr(self, "parts") else "default"

    @strategy.setter
    def strategy(self, value: str) -> None:
        if not hasattr(self, "parts"):
            return
        if "+" in value and len(value.split("+")) == len(self.parts):  # one per part, as the getter prints
            for p, v in zip(self.parts, value.split("+")):
                p.strategy = v
            return
        known = [p for p in self.parts if value in p.valid_strategies()]
        if not known:
            valid = sorted({s for p in self.parts for s in p.valid_strategies()})
            raise OptionError(
                "strategy",
                f"no part of combo knows strategy '{value}'; valid: {', '.join(valid)} (set encoding.strategy=...)",
            )
        for p in known:
            p.strategy = value

    def add_to_tokens(self, x, grid):
        for p in self.parts:
            x = p.add_to_tokens(x, grid)
        return x

    def after_block(self, x, grid, block):
        for p in self.parts:
            x = p.after_block(x, grid, block)
        return x

    def rotate_qk(self, q, k, grid, block):
        for p in self.parts:
            q, k = p.rotate_qk(q, k, grid, block)
        return q, k

    def attention_bias(self, grid, block, device, dtype):
        total = None
        for p in self.parts:
            b = p.attention_bias(grid, block, device, dtype)
            if b is not None:
                total = b if total is None else total + b
        return total

    def no_weight_decay(self) -> set[str]:
        return {f"parts.{i}.{n}" for i, p in enumerate(self.parts) for n in p.no_weight_decay()}

    def extra_repr(self) -> str:
        return f"parts={[p.name for p in self.parts]}"
