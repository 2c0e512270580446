"""vitpos's Hydra sweeper: :mod:`.checked` (``hydra/sweeper=vitpos``, the default of ``configs/train.yaml``: the
jobs of Hydra's basic sweeper, every one composed and checked before any is launched)."""
