"""Evaluation sizes against the memory free for this process: refused before training, not
after it (an evaluation at 4096 px would otherwise fail hours in).

The estimate and the rule are :mod:`vitpos.eval_memory`'s, the same ones
``python -m vitpos.extrapolate`` applies before it evaluates a checkpoint."""

from __future__ import annotations

from vitpos.checks.data import image_counts
from vitpos.eval_memory import MEMORY_FRACTION, run_memory_problem

__all__ = ["MEMORY_FRACTION", "check_memory"]


def check_memory(c: dict, image: bool) -> None:
    """Refuse a test size (the training size and every ``eval`` size) whose evaluation would not fit."""
    counts = image_counts(c["data"]) if image else None
    problem = run_memory_problem(c, "res" if image else "len", counts.test if counts else None)
    if problem is not None:
        raise problem
