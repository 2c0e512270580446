"""vitpos's Hydra plugins: :mod:`.tolerant` (submitit launchers that wait for every job)."""
