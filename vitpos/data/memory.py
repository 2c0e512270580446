"""In-memory tensor data sets handed out as whole batches, with samplers that
make training resumable exactly and DDP evaluation free of duplicates.

- :class:`EpochSampler`: the training order of epoch ``e`` is a permutation
  drawn from a generator seeded by ``(seed, e)`` alone, so a run resumed at
  the start of epoch ``e`` sees exactly the batches an uninterrupted run sees.
  Lightning calls ``set_epoch`` on it before every epoch. Under DDP each rank
  takes every ``world``-th index of that permutation, cut to the same length on
  every rank (equal step counts keep the gradient all-reduce in step).
- :class:`ShardSampler`: evaluation order, each rank a contiguous slice, never
  padded: summed over ranks, every sample is scored exactly once (unlike
  ``DistributedSampler``, which pads with repeats to equal lengths).
- :class:`SizedBatchSampler` (multi-resolution training, ``data.train_sizes``):
  the batches of an :class:`EpochSampler`, each tagged with the resolution it
  trains at, drawn from ``(seed, epoch, batch index)`` alone (so exact resume
  holds, and every DDP rank draws the same size for its batch ``i``); the
  batch then arrives as ``(images, labels, size)``, ``size`` a side or ``(h, w)``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, Sampler

from vitpos.sizes import plain_size

from .schedule import progressive_size


def epoch_seed(seed: int, epoch: int, *more: int) -> int:
    """A well-mixed 63-bit seed from (seed, epoch, ...) (numpy ``SeedSequence``)."""
    words = np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int(epoch), *map(int, more)]).generate_state(2, np.uint32)
    return int(words[0]) << 31 | int(words[1]) >> 1


class TensorBatches(Dataset):
    """Like ``TensorDataset``, plus ``__getitems__`` so a DataLoader fetches a
    batch with one index op per tensor instead of stacking B samples."""

    def __init__(self, *tensors: torch.Tensor):
        if len({len(t) for t in tensors}) != 1:
            raise ValueError("all tensors need the same first dimension")
        self.tensors = tensors

    def __len__(self) -> int:
        return len(self.tensors[0])

    def __getitem__(self, i):
        return tuple(t[i] for t in self.tensors)

    def __getitems__(self, indices):
        idx = torch.as_tensor(indices, dtype=torch.long, device=self.tensors[0].device)  # data.on_device: a GPU
        batch = tuple(t[idx] for t in self.tensors)
        size = getattr(indices, "size", None)  # a SizedBatch: the resolution this batch trains at
        return batch if size is None else (*batch, size)


class EpochSampler(Sampler[int]):
    """A fresh permutation per epoch from ``(seed, epoch)``; rank ``rank`` of
    ``world`` keeps ``perm[rank::world][: n // world]``."""

    def __init__(self, n: int, seed: int = 0, rank: int = 0, world: int = 1):
        if world > n:
            raise ValueError(f"{n} training samples cannot be split over {world} processes")
        self.n, self.seed, self.rank, self.world = n, seed, rank, world
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n // self.world

    def __iter__(self):
        gen = torch.Generator().manual_seed(epoch_seed(self.seed, self.epoch))
        perm = torch.randperm(self.n, generator=gen)  # the same on every rank
        return iter(perm[self.rank :: self.world][: len(self)].tolist())


class ShardSampler(Sampler[int]):
    """Indices ``[n*rank//world, n*(rank+1)//world)`` in order: no padding, no repeats."""

    def __init__(self, n: int, rank: int = 0, world: int = 1):
        self.start, self.stop = n * rank // world, n * (rank + 1) // world

    def __len__(self) -> int:
        return self.stop - self.start

    def __iter__(self):
        return iter(range(self.start, self.stop))


_SIZE_SALT = 0x512E5


class SizedBatch(list):
    """A batch's indices plus ``size``, the resolution it trains at (:class:`SizedBatchSampler`):
    a side, or ``(h, w)`` for a non-square size."""

    size: int | tuple[int, int]


def size_of_batch(sizes: tuple, seed: int, epoch: int, index: int) -> int | tuple[int, int]:
    """The resolution batch ``index`` of epoch ``epoch`` trains at: one of ``sizes``, uniformly,
    from a generator seeded by ``(seed, epoch, index)`` alone (not the rank, not the global RNG)."""
    # the salt keeps this stream apart from the epoch's permutation (SeedSequence pads with zeros, so
    # (seed, epoch) and (seed, epoch, 0) would otherwise give the same generator)
    gen = torch.Generator().manual_seed(epoch_seed(seed, epoch, index, _SIZE_SALT))
    return plain_size(sizes[int(torch.randint(len(sizes), (1,), generator=gen))])


class SizedBatchSampler(BatchSampler):
    """The batches of ``sampler`` (an :class:`EpochSampler`) as :class:`SizedBatch` lists, batch
    ``i`` of epoch ``e`` tagged with :func:`size_of_batch` ``(sizes, seed, e, i)``, or with
    ``progressive_epochs`` (a progressive schedule over that many epochs) :func:`progressive_size`
    ``(sizes, e, progressive_epochs, size_epochs)``. Lightning's
    ``set_epoch`` reaches the sampler through ``batch_sampler.sampler``."""

    def __init__(
        self,
        sampler: EpochSampler,
        batch_size: int,
        drop_last: bool,
        sizes,
        seed: int = 0,
        progressive_epochs: int | None = None,
        size_epochs: tuple[int, ...] | None = None,
    ):
        super().__init__(sampler, batch_size, drop_last)
        self.sizes, self.seed, self.progressive_epochs = tuple(map(plain_size, sizes)), seed, progressive_epochs
        self.size_epochs = None if size_epochs is None else tuple(int(n) for n in size_epochs)

    def __iter__(self):
        epoch = self.sampler.epoch
        for i, indices in enumerate(super().__iter__()):
            batch = SizedBatch(indices)
            if self.progressive_epochs is None:
                batch.size = size_of_batch(self.sizes, self.seed, epoch, i)
            else:
                batch.size = progressive_size(self.sizes, epoch, self.progressive_epochs, self.size_epochs)
            yield batch


def _batch_as_is(batch):
    return batch


def batch_loader(
    tensors: tuple[torch.Tensor, ...],
    batch_size: int,
    shuffle: bool,
    drop_last: bool = False,
    collate_fn=_batch_as_is,
    seed: int = 0,
    rank: int = 0,
    world: int = 1,
    sizes: tuple | None = None,
    progressive_epochs: int | None = None,
    size_epochs: tuple[int, ...] | None = None,
) -> DataLoader:
    """A DataLoader over in-memory tensors that fetches each batch by one index op
    per tensor; ``collate_fn`` receives that tuple of batched tensors.

    ``shuffle``: an :class:`EpochSampler` from ``seed`` (training); otherwise
    a :class:`ShardSampler` (evaluation). ``rank``/``world``: this process's
    share under DDP (the Trainer runs with ``use_distributed_sampler=False``).
    ``sizes`` (training only; each a side or ``(h, w)``): each batch also carries the resolution it trains at
    (:class:`SizedBatchSampler`), as its last element; ``progressive_epochs``: spread them
    progressively over that many epochs instead of drawing one per batch (``size_epochs``: the
    epochs of each size, :func:`progressive_size`).
    """
    n = len(tensors[0])
    sampler = EpochSampler(n, seed, rank, world) if shuffle else ShardSampler(n, rank, world)
    if sizes:
        if not shuffle:
            raise ValueError("per-batch sizes are for training batches (shuffle=True)")
        sized = SizedBatchSampler(sampler, batch_size, drop_last, sizes, seed, progressive_epochs, size_epochs)
        batching = {"batch_sampler": sized}
    else:
        batching = {"batch_size": batch_size, "sampler": sampler, "drop_last": drop_last}
    # its own generator: otherwise creating the iterator draws a worker base seed
    # from the global RNG, at a point that differs between a resumed and an
    # uninterrupted run (Lightning creates a resumed epoch's iterator earlier)
    return DataLoader(
        TensorBatches(*tensors), **batching, collate_fn=collate_fn, generator=torch.Generator().manual_seed(seed)
    )


def process_share(datamodule) -> tuple[int, int]:
    """(rank, world size) of the trainer a datamodule is attached to; (0, 1) alone."""
    trainer = getattr(datamodule, "trainer", None)
    if trainer is None:
        return 0, 1
    return int(trainer.global_rank), int(trainer.world_size)
