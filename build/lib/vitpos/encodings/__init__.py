"""Positional encodings for images and sequences behind one registry.

>>> from vitpos.encodings import EncodingContext, create_encoding, list_encodings
>>> pe = create_encoding("rope_2d", EncodingContext(dim=192, num_heads=3, depth=6, grid=(8, 8)))
"""

from . import absolute, alibi, combo, cpe, relative, rope, sincos, t5_bias  # noqa: F401  (register the encodings)
from .base import (
    EncodingContext,
    Grid,
    PositionalEncoding,
    create_encoding,
    get_encoding_class,
    list_encodings,
    register,
)

__all__ = [
    "EncodingContext",
    "Grid",
    "PositionalEncoding",
    "create_encoding",
    "get_encoding_class",
    "list_encodings",
    "register",
]
