"""The progressive size schedule: which of ``data.train_sizes`` an epoch trains at, with
``data.size_epochs``. Whether ``data.size_schedule`` and ``data.size_epochs`` fit the sizes is
checked once, by :func:`vitpos.data.options.check_size_schedule`; the random per-batch draw is
:func:`vitpos.data.memory.size_of_batch`."""

from __future__ import annotations

from vitpos.sizes import plain_size


def progressive_size(sizes: tuple, epoch: int, epochs: int, size_epochs: tuple[int, ...] | None = None):
    """Progressive resizing (FixRes, Touvron et al. 2019: train at low resolution, finish at the
    test resolution; the progressive-resizing schedules of fast CIFAR/ImageNet training): the
    ``epochs`` split into ``len(sizes)`` runs, trained at ``sizes`` in the listed order.

    ``size_epochs`` (``data.size_epochs``): the epochs of each run when they add up to ``epochs``, e.g.
    ``(6, 3, 3)`` over 12: most epochs at low resolution, a short finish at the test resolution;
    over another number of epochs they scale (24: 12+6+6). None: equal runs. When the runs do
    not come out whole, the later ones get the extra epoch (9 epochs over 3 sizes: 3+3+3; 10:
    3+3+4; 1: the last size alone). Epochs past the end stay at the last size. A size is a side
    or an ``[h, w]`` pair, returned as :func:`vitpos.sizes.plain_size` (a side, or ``(h, w)``)."""
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
            return plain_size(size)
    return plain_size(sizes[-1])
