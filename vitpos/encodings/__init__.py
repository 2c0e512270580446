"""Positional encodings for images and sequences behind one registry.

>>> from vitpos.encodings import create_encoding, list_encodings
>>> pe = create_encoding("rope_2d", dim=192, num_heads=3, grid=(8, 8))  # or create_encoding(name, EncodingContext(...))

Every module of the package is imported (its ``@register`` classes join the
registry): adding an encoding is adding one file. Encodings from outside the
package: :mod:`vitpos.encodings.plugins`.

This package imports torch and itself only: the folder can be copied into
another project as it is.
"""

from .base import (
    EncodingContext,
    Grid,
    OptionError,
    PositionalEncoding,
    create_encoding,
    get_encoding_class,
    list_encodings,
    option_group,
    register,
)
from .cross_modal import CrossModalRoPE
from .plugins import import_package_modules

import_package_modules(__name__, __path__)  # every module registers its encodings: no list to edit

__all__ = [
    "CrossModalRoPE",
    "EncodingContext",
    "Grid",
    "OptionError",
    "PositionalEncoding",
    "create_encoding",
    "get_encoding_class",
    "list_encodings",
    "option_group",
    "register",
]
