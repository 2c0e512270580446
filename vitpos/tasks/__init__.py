"""LightningModules (what is trained), the steps they share, and the dispatch
from a config to one (:func:`build`)."""

from .build import build

__all__ = ["build"]
