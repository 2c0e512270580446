"""The progressive size schedule (which of ``data.train_sizes`` an epoch trains at, with
``data.size_epochs``), and the one rule for whether ``data.size_schedule`` and
``data.size_epochs`` fit the sizes. Free of torch, so the command-line checks
(:mod:`vitpos.validate`) and the data module share it; the random per-batch draw is
:func:`vitpos.data.memory.size_of_batch`."""

from __future__ import annotations

from collections.abc import Sequence

SIZE_SCHEDULES = ("random", "progressive")


def progressive_size(
    sizes: tuple[int, ...], epoch: int, epochs: int, size_epochs: tuple[int, ...] | None = None
) -> int:
    """Progressive resizing (FixRes, Touvron et al. 2019: train at low resolution, finish at the
    test resolution; the progressive-resizing schedules of fast CIFAR/ImageNet training): the
    ``epochs`` split into ``len(sizes)`` runs, trained at ``sizes`` in the listed order.

    ``size_epochs`` (``data.size_epochs``): the epochs of each run when they add up to ``epochs``, e.g.
    ``(6, 3, 3)`` over 12: most epochs at low resolution, a short finish at the test resolution;
    over another number of epochs they scale (24: 12+6+6). None: equal runs. When the runs do
    not come out whole, the later ones get the extra epoch (9 epochs over 3 sizes: 3+3+3; 10:
    3+3+4; 1: the last size alone). Epochs past the end stay at the last size."""
    weights = tuple(int(n) for n in size_epochs) if size_epochs is not None else (1,) * len(sizes)
    if len(weights) != len(sizes):
        raise ValueError(f"size_epochs {size_epochs} must give one count per size of {sizes}")
    total, epochs = sum(weights), max(int(epochs), 1)
    remaining = max(epochs - 1 - int(epoch), 0)  # epochs after this one
    # the first size whose later runs fit in the remaining share: tail / total <= remaining / epochs
    tail = total
    for size, w in zip(sizes, weights):
        tail -= w
        if tail * epochs <= remaining * total:
            return int(size)
    return int(sizes[-1])


def size_schedule_problem(sizes, schedule: str, size_epochs) -> tuple[str, str, str] | None:
    """``(option, problem, hint)`` when ``data.size_schedule`` and ``data.size_epochs`` do not
    fit ``data.train_sizes`` (``sizes``, null or a list), else None; ``size_epochs`` may be
    any sequence (a list, or Hydra's ListConfig). The one rule both
    :func:`vitpos.validate.check_train_sizes` and :class:`vitpos.data.images.ImageDataModule` apply."""
    if schedule not in SIZE_SCHEDULES:
        return "data.size_schedule", f"unknown {schedule!r}", f"valid: {', '.join(SIZE_SCHEDULES)}"
    if schedule == "progressive" and not sizes:
        return "data.size_schedule", "progressive needs the sizes to go through", "e.g. data.train_sizes=[16,24,32]"
    if size_epochs is None:
        return None
    if schedule != "progressive" or not isinstance(size_epochs, Sequence) or len(size_epochs) != len(sizes or []):
        return (
            "data.size_epochs",
            f"{size_epochs!r} must give the epochs of each of data.train_sizes={sizes!r}, "
            "with size_schedule=progressive",
            "e.g. data.train_sizes=[16,24,32] data.size_schedule=progressive data.size_epochs=[6,3,3]",
        )
    for i, n in enumerate(size_epochs):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            return f"data.size_epochs[{i}]", f"{n!r} is not a positive number of epochs", "e.g. [6,3,3]"
    return None
