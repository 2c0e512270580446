"""Positional encodings for images and sequences behind one registry.

>>> from vitpos.encodings import create_encoding, list_encodings
>>> pe = create_encoding("rope_2d", dim=192, num_heads=3, grid=(8, 8))  # or create_encoding(name, EncodingContext(...))

This package imports torch and itself only: the folder can be copied into
another project as it is.
"""

from . import (  # noqa: F401  (register them)
    absolute,
    alibi,
    combo,
    comrope,
    cpe,
    fire,
    liere,
    lookhere,
    pape,
    relative,
    rope,
    rope_dinov3,
    sincos,
    string_rope,
    t5_bias,
)
from .base import (
    EncodingContext,
    Grid,
    OptionError,
    PositionalEncoding,
    create_encoding,
    get_encoding_class,
    list_encodings,
    register,
)
from .cross_modal import CrossModalRoPE

__all__ = [
    "CrossModalRoPE",
    "EncodingContext",
    "Grid",
    "OptionError",
    "PositionalEncoding",
    "create_encoding",
    "get_encoding_class",
    "list_encodings",
    "register",
]
