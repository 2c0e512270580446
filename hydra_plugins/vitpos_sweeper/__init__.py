"""vitpos's Hydra sweeper (:mod:`.checked`): every job composed and checked before any is launched."""
