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

Each class declares what it accepts, so that a config checker (or a user) can
ask it instead of knowing it: :meth:`PositionalEncoding.option_names` (its
keyword options), ``strategies`` and ``strategy_aliases``
(:meth:`PositionalEncoding.valid_strategies`). Bad values raise
:class:`OptionError`, which names the option as ``encoding.<name>`` (the prefix set by
:func:`create_encoding`).

This package imports torch and itself only: copy the folder into another
project and ``create_encoding("rope_2d", dim=64, num_heads=4, grid=(8, 8))``.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import numbers
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from .cache import Grid, GridCache  # noqa: F401  (re-exported: every encoding imports both from here)


class OptionError(ValueError):
    """A bad option: ``key`` is its bare name (``base``), ``group`` the config section it belongs to
    (``encoding``); the message says what was wrong and what is allowed, ``fix`` how to fix it.

    The raising code names the bare option only: the group is set once, by whoever builds the object
    from a config section (:func:`option_group`; :func:`create_encoding` for the encodings), so the
    same class reads ``encoding.base`` when built from a run's config and ``base`` when built by hand."""

    def __init__(self, option: str, message: str, fix: str | None = None, group: str | None = None):
        super().__init__(message)
        self.key, self.fix, self.group = option, fix, group

    @property
    def option(self) -> str:
        """The option as a config key: ``group.key`` (``encoding.base``), or the bare key without a group."""
        return f"{self.group}.{self.key}" if self.group else self.key

    def line(self) -> str:
        """The one line a user reads: the option, what was wrong, and the fix (when the error has one)."""
        message = super().__str__().rstrip(".")
        return f"{self.option}: {message}" + (f" ({self.fix})" if self.fix else "")


class UnknownOption(OptionError, TypeError):
    """An option the encoding's ``__init__`` does not take (a ``TypeError``, as Python's own)."""

    def __str__(self) -> str:
        return f"{super().__str__()} ({self.fix})"


@contextlib.contextmanager
def option_group(group: str) -> Iterator[None]:
    """``with option_group("model"): ...`` (or ``@option_group("model")`` on a constructor): an
    :class:`OptionError` raised inside without a group gets ``group``; one that has a group (an
    encoding's, raised while a model builds it) keeps its own."""
    try:
        yield
    except OptionError as err:
        if err.group is None:
            err.group = group
        raise


def check_choice(encoding: str, option: str, value, valid: Sequence[str]):
    """``value`` if it is one of ``valid``, else an :class:`OptionError` listing them."""
    if value not in valid:
        raise OptionError(
            option,
            f"unknown {option} '{value}' for encoding '{encoding}'; valid: {', '.join(valid)} (encoding.{option}=...)",
        )
    return value


def check_positive(option: str, value, fix: str, allow_none: bool = False):
    """``value`` if it is a finite number > 0 (or None with ``allow_none``),
    else an :class:`OptionError` naming ``option`` and the ``fix``."""
    if value is None and allow_none:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value > 0):
        rule = "must be > 0 or null" if allow_none else "must be a finite number > 0"
        raise OptionError(option, f"{rule}, got {value!r}", fix)
    return value


def check_head_dim(encoding: str, ctx: EncodingContext, multiple: int) -> None:
    """A ValueError unless the model's width splits into heads whose width is a multiple of ``multiple``."""
    if ctx.dim % ctx.num_heads or ctx.head_dim % multiple:
        raise ValueError(
            f"encoding '{encoding}' needs a head dim (model.dim / model.num_heads = {ctx.dim}/{ctx.num_heads}) "
            f"that is a multiple of {multiple}; change model.dim or model.num_heads"
        )


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
    #: other names accepted for a strategy: alias -> one of ``strategies``.
    strategy_aliases: ClassVar[dict[str, str]] = {}
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

    # ------------------------------------------------- declared options, strategy
    @classmethod
    def option_names(cls) -> list[str]:
        """The keyword options the class takes (sorted), following ``**kw`` up
        its bases; ``ctx`` is the geometry, not an option."""
        names: set[str] = set()
        for klass in cls.__mro__:
            if "__init__" not in vars(klass):
                continue
            params = inspect.signature(vars(klass)["__init__"]).parameters.values()
            keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
            names |= {p.name for p in params if p.kind in keyword and p.name not in ("self", "ctx")}
            if not any(p.kind is p.VAR_KEYWORD for p in params):
                break
        return sorted(names)

    @classmethod
    def option_default(cls, option: str):
        """The default value of the keyword option ``option`` (the nearest
        ``__init__`` up the bases that declares it)."""
        for klass in cls.__mro__:
            params = inspect.signature(vars(klass)["__init__"]).parameters if "__init__" in vars(klass) else {}
            if option in params:
                return params[option].default
        raise KeyError(f"encoding '{cls.name}' has no option '{option}'")

    @classmethod
    def valid_strategies(cls) -> tuple[str, ...]:
        """Every accepted strategy name: ``strategies``, then their aliases."""
        aliases = tuple(a for a, s in cls.strategy_aliases.items() if s in cls.strategies and a not in cls.strategies)
        return tuple(cls.strategies) + aliases

    @classmethod
    def resolve_strategy(cls, value: str) -> str:
        """The strategy ``value`` names (aliases resolved), or an :class:`OptionError`
        listing the valid ones."""
        value = cls.strategy_aliases.get(value, value)
        if value not in cls.strategies:
            aliases = [f"{a} = {s}" for a, s in cls.strategy_aliases.items() if a in cls.valid_strategies()]
            also = f"; aliases: {', '.join(aliases)}" if aliases else ""
            raise OptionError(
                "strategy",
                f"unknown strategy '{value}' for encoding '{cls.name}'; "
                f"valid: {', '.join(cls.strategies)}{also} (set encoding.strategy=...)",
            )
        return value

    @property
    def strategy(self) -> str:
        return self._strategy

    @strategy.setter
    def strategy(self, value: str) -> None:
        self._strategy = self.resolve_strategy(value)

    @contextlib.contextmanager
    def using_strategy(self, value: str) -> Iterator[PositionalEncoding]:
        """``with encoding.using_strategy("ntk"): ...``: the strategy ``value`` inside the block (set
        through ``strategy``, so an alias resolves and an unknown name raises as there), the one before
        it afterwards, also when the block (or setting ``value``) raises."""
        previous = self.strategy
        try:
            self.strategy = value
            yield self
        finally:
            self.strategy = previous

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
    def is_train_grid(self, grid: Grid) -> bool:
        """Whether ``grid`` is the training grid. False for a symbolic grid (``torch.export`` with dynamic
        sizes): an encoding that skips its resize on the training grid then traces the resize, which is
        the identity there, instead of fixing the exported graph to the training grid."""
        if not all(isinstance(n, int) for n in grid):
            return False
        return tuple(grid) == self.train_grid

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
    """Class decorator: make ``cls`` constructible by its ``name``. A class that is no
    :class:`PositionalEncoding`, or declares no strategy or grid, is refused here, when its module
    is imported, rather than when it is first built."""
    if not (isinstance(cls, type) and issubclass(cls, PositionalEncoding)):
        raise TypeError(f"@register: {cls!r} is not a subclass of PositionalEncoding (subclass it)")
    for attr, example in (("strategies", '("interpolate",)'), ("grid_dims", "(2,)")):
        value = getattr(cls, attr)
        if not isinstance(value, tuple) or not value:
            raise TypeError(f"@register: {cls.__name__}.{attr} must be a non-empty tuple, got {value!r} "
                            f"(e.g. {attr} = {example})")  # fmt: skip
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"encoding name '{cls.name}' is registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def list_encodings(grid_dims: int | None = None, plugins: bool = False) -> list[str]:
    """Registered names, sorted; only those supporting ``grid_dims`` if given. ``plugins``: also
    the encodings registered from outside the package (:mod:`vitpos.encodings.plugins`); the
    built-in list is what sweeps and registry-wide tests cover."""
    from .plugins import is_builtin

    return sorted(
        name
        for name, cls in _REGISTRY.items()
        if (grid_dims is None or grid_dims in cls.grid_dims) and (plugins or is_builtin(cls))
    )


def get_encoding_class(name: str) -> type[PositionalEncoding]:
    """The class registered as ``name``; an unknown name first looks through the installed
    plug-ins (entry-point group ``vitpos.encodings``), then raises a ``KeyError`` listing the
    valid names."""
    from .plugins import load_entry_points

    if name not in _REGISTRY and not (load_entry_points() and name in _REGISTRY):
        others = [n for n in list_encodings(plugins=True) if n not in list_encodings()]
        also = f"; plug-ins: {', '.join(others)}" if others else ""
        raise KeyError(
            f"unknown encoding '{name}'; valid names: {', '.join(list_encodings())}{also} "
            "(set encoding=<name>, or encoding.parts=[a,b] with encoding=combo; an encoding of your own: "
            "encoding=plugin encoding.module=<file.py> encoding.name=<name>)"
        )
    return _REGISTRY[name]


def create_encoding(
    name: str,
    ctx: EncodingContext | None = None,
    *,
    dim: int | None = None,
    num_heads: int | None = None,
    grid: Grid | int | None = None,
    depth: int = 1,
    num_prefix_tokens: int = 0,
    **options,
) -> PositionalEncoding:
    """Build the encoding ``name`` for a model geometry, with its ``options``.

    The geometry is either ``ctx`` or given directly::

        create_encoding("rope_2d", EncodingContext(dim=64, num_heads=4, depth=1, grid=(8, 8)))
        create_encoding("rope_2d", dim=64, num_heads=4, grid=(8, 8))  # the same; depth 1, no class token
        create_encoding("alibi", dim=64, num_heads=4, grid=128)  # a sequence of 128 tokens: grid (128,)

    ``depth`` matters to encodings with per-block parameters (blocks 0 ..
    depth-1); ``num_prefix_tokens`` counts class tokens in front of the grid.
    Unknown names raise a ``KeyError`` that lists the valid ones; unknown
    options an :class:`UnknownOption` (a ``TypeError``) naming the options the encoding takes.
    """
    cls = get_encoding_class(name)
    options.pop("module", None)  # the plug-in file that registered ``name``: loaded by the command, never here
    direct = {"dim": dim, "num_heads": num_heads, "grid": grid}
    if ctx is None:
        missing = [k for k, v in direct.items() if v is None]
        if missing:
            raise TypeError(
                f"create_encoding('{name}') needs the model geometry: pass an EncodingContext, "
                f"or dim=, num_heads= and grid= (missing: {', '.join(missing)})"
            )
        grid = (grid,) if isinstance(grid, int) else tuple(grid)
        ctx = EncodingContext(dim, num_heads, depth, grid, num_prefix_tokens)
    elif any(v is not None for v in direct.values()) or (depth, num_prefix_tokens) != (1, 0):
        raise TypeError(f"create_encoding('{name}'): pass either an EncodingContext or dim=/num_heads=/grid=, not both")
    params = cls.option_names()
    unknown = sorted(set(options) - set(params))
    with option_group("encoding"):  # the one place an encoding's errors get their ``encoding.`` prefix
        if unknown:
            valid = f"valid options: {', '.join(params)}"
            raise UnknownOption(unknown[0], f"'{name}' takes no option '{unknown[0]}'", valid)
        return cls(ctx, **options)
