"""Generated toy sequence tasks (no download), as a LightningDataModule.

Each example is a random sequence of ``vocab_size`` content tokens whose
length is uniform in [min_len, train_len]; the target is one class per token:

- ``copy_offset``: the input token ``offset`` places earlier (target at i is
  the input at i - k; the first k positions are ignored). Needs *relative*
  position only, so it is the task on which relative encodings should keep
  working far beyond the training length.
- ``reverse``: the input at n - 1 - i, n the example's own length. Needs
  absolute position and the length.
- ``sort``: the i-th smallest input token.
- ``position_probe``: every input is the same token; the target is the
  token's own index (``probe_classes`` classes; indices beyond are ignored).
  With ``anchor`` the first token is a distinct one, a fixed landmark that
  lets relative encodings measure a distance to the start.

Batches are dicts: ``tokens`` (B, N) long, ``targets`` (B, N) long with -100
where ignored (padding included), ``padding_mask`` (B, N) bool, True at
padding, with N the longest example of the batch. Data sets are tensors
generated once from ``seed``; ``test_dataloader_at(L)`` makes test sequences
of exactly L tokens from a seed derived from ``seed`` and L.
"""

from __future__ import annotations

import lightning as L
import torch
from torch.utils.data import DataLoader

from vitpos.errors import UserError

from .memory import batch_loader, process_share

TASKS = ("copy_offset", "reverse", "sort", "position_probe")
IGNORE = -100


def task_sizes(task: str, vocab_size: int = 16, probe_classes: int = 512) -> tuple[int, int]:
    """(input vocabulary incl. the padding token, number of output classes)."""
    if task not in TASKS:
        raise UserError("data.task", f"unknown sequence task '{task}'", f"valid: {', '.join(TASKS)}")
    return vocab_size + 1, probe_classes if task == "position_probe" else vocab_size


def make_sequences(
    task: str,
    num: int,
    min_len: int,
    max_len: int,
    vocab_size: int = 16,
    offset: int = 3,
    probe_classes: int = 512,
    anchor: bool = False,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(tokens, targets, lengths): (num, max_len), (num, max_len), (num,).

    Padding holds the token ``vocab_size`` and the target -100.
    """
    task_sizes(task)
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= data.min_len <= length, got min_len={min_len}, length={max_len}")
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (num,), generator=g)  # (num,)
    pos = torch.arange(max_len)  # (N,)
    real = pos[None, :] < lengths[:, None]  # (num, N), False at padding
    tokens = torch.randint(0, vocab_size, (num, max_len), generator=g)
    targets = torch.full_like(tokens, IGNORE)
    if task == "copy_offset":
        targets[:, offset:] = tokens[:, : max_len - offset]
    elif task == "reverse":
        source = (lengths[:, None] - 1 - pos[None, :]).clamp(min=0)  # (num, N), n - 1 - i
        targets = tokens.gather(1, source)
    elif task == "sort":
        targets = tokens.masked_fill(~real, vocab_size).sort(dim=1).values  # padding sorts last
    else:  # position_probe
        tokens = torch.zeros_like(tokens)
        if anchor:
            tokens[:, 0] = 1
        targets = pos.expand(num, -1).clone()
        targets[targets >= probe_classes] = IGNORE
    tokens = tokens.masked_fill(~real, vocab_size)
    targets = targets.masked_fill(~real, IGNORE)
    return tokens, targets, lengths


def collate(items: tuple[torch.Tensor, torch.Tensor, torch.Tensor], pad_token: int) -> dict[str, torch.Tensor]:
    """Trim a fetched batch to its longest example and add the padding mask."""
    tokens, targets, lengths = items
    n = int(lengths.max())
    return {
        "tokens": tokens[:, :n],
        "targets": targets[:, :n],
        "padding_mask": tokens[:, :n] == pad_token,  # (B, n), True at padding
    }


class _Collate:  # a picklable collate_fn, should someone set num_workers
    def __init__(self, pad_token: int):
        self.pad_token = pad_token

    def __call__(self, items):
        return collate(items, self.pad_token)


class SequenceDataModule(L.LightningDataModule):
    """Train/val/test sets of one toy task, in memory. See the module docstring."""

    def __init__(
        self,
        task: str = "copy_offset",
        vocab_size: int = 16,
        train_len: int = 64,
        min_len: int = 8,
        offset: int = 3,
        probe_classes: int = 512,
        anchor: bool = False,
        num_train: int = 20000,
        num_val: int = 1000,
        num_test: int = 1000,
        num_length_test: int = 500,
        batch_size: int = 64,
        eval_batch_size: int = 128,
        seed: int = 0,
        name: str | None = None,  # the config's name, unused
    ):
        super().__init__()
        self.input_vocab, self.num_classes = task_sizes(task, vocab_size, probe_classes)
        if task == "copy_offset" and not 1 <= offset < min_len:
            raise UserError("data.offset", f"copy_offset needs 1 <= data.offset < data.min_len, got {offset} and "
                            f"{min_len}", f"e.g. data.offset={min(3, max(min_len - 1, 1))}")  # fmt: skip
        self.task, self.train_len, self.min_len = task, train_len, min_len
        self.pad_token = vocab_size
        self.gen_kw = dict(vocab_size=vocab_size, offset=offset, probe_classes=probe_classes, anchor=anchor)
        self.sizes = {"train": num_train, "val": num_val, "test": num_test}
        self.num_length_test = num_length_test
        self.batch_size, self.eval_batch_size, self.seed = batch_size, eval_batch_size, seed
        self.splits: dict[str, tuple[torch.Tensor, ...]] = {}
        self._at_length: dict[int, tuple[torch.Tensor, ...]] = {}

    def _seed(self, code: int) -> int:
        return self.seed * 1_000_003 + code

    def setup(self, stage: str | None = None) -> None:
        for code, (split, num) in enumerate(self.sizes.items()):
            if split not in self.splits:
                self.splits[split] = make_sequences(
                    self.task, num, self.min_len, self.train_len, seed=self._seed(code), **self.gen_kw
                )

    def _loader(self, tensors, batch_size: int, shuffle: bool, shard: bool = True) -> DataLoader:
        """Training order of epoch e from (data seed, e); evaluation sharded over
        DDP ranks without padding (``shard``; see vitpos.data.memory)."""
        rank, world = process_share(self) if shard else (0, 1)
        collate_fn = _Collate(self.pad_token)
        return batch_loader(
            tensors, batch_size, shuffle, collate_fn=collate_fn, seed=self._seed(7), rank=rank, world=world
        )

    def train_dataloader(self) -> DataLoader:
        self.setup()
        return self._loader(self.splits["train"], self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        self.setup()
        return self._loader(self.splits["val"], self.eval_batch_size, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        self.setup()
        return self._loader(self.splits["test"], self.eval_batch_size, shuffle=False)

    def test_dataloader_at(self, length: int, batch_size: int | None = None) -> DataLoader:
        """``num_length_test`` test sequences of exactly ``length`` tokens, for
        length extrapolation; the same sequences on every call and run."""
        if length <= self.gen_kw["offset"] and self.task == "copy_offset":
            raise ValueError(f"length {length} leaves nothing to copy with data.offset={self.gen_kw['offset']}")
        if length not in self._at_length:
            self._at_length[length] = make_sequences(
                self.task, self.num_length_test, length, length, seed=self._seed(10_000 + length), **self.gen_kw
            )
        return self._loader(self._at_length[length], batch_size or self.eval_batch_size, shuffle=False, shard=False)
