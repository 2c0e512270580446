"""An in-memory tensor data set that hands out whole batches by fancy indexing."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Dataset


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
        idx = torch.as_tensor(indices, dtype=torch.long)
        return tuple(t[idx] for t in self.tensors)


def _batch_as_is(batch):
    return batch


def batch_loader(
    tensors: tuple[torch.Tensor, ...],
    batch_size: int,
    shuffle: bool,
    drop_last: bool = False,
    collate_fn=_batch_as_is,
    generator: torch.Generator | None = None,
) -> DataLoader:
    """A DataLoader over in-memory tensors that fetches each batch by one index op
    per tensor; ``collate_fn`` receives that tuple of batched tensors."""
    return DataLoader(
        TensorBatches(*tensors),
        batch_size=batch_size,
        shuffle=shuffle,
        drop_last=drop_last,
        collate_fn=collate_fn,
        generator=generator,
    )
