"""Per-token classification on toy sequences: the LightningModule behind ``task=sequence``."""

from __future__ import annotations

from vitpos.config.saved import complete
from vitpos.data.sequence import IGNORE, task_sizes
from vitpos.models import network

from .base import TaskModule


class SequenceTask(TaskModule):
    """Takes one plain config dict (``model``, ``encoding``, ``optim``, ``data``)
    and saves it, so ``SequenceTask.load_from_checkpoint(path)`` rebuilds the
    model without Hydra or the data. ``data`` needs ``task`` and ``train_len``
    (and ``vocab_size``, ``probe_classes`` if not the defaults).

    Loss and accuracy are per token over the targets that are not -100
    (padding, and positions with nothing to predict).
    """

    def __init__(self, cfg: dict):
        cfg = complete(cfg, image=False)  # a key an older or hand-written config lacks: vitpos/config/saved.py
        data = cfg["data"]
        vocab, classes = task_sizes(data["task"], data["vocab_size"], data["probe_classes"])
        super().__init__(cfg, network(cfg, classes, vocab), num_classes=classes, ignore_index=IGNORE)
        self.save_hyperparameters()

    def logits_targets(self, batch, forward):
        logits = forward(batch["tokens"], batch["padding_mask"])  # (B, N, classes)
        return logits.flatten(0, 1), batch["targets"].flatten()  # (B*N, classes), (B*N,)
