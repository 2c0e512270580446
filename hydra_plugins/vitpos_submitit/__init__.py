"""vitpos's Hydra plugins: :mod:`.tolerant` (``hydra/launcher=vitpos_slurm``, ``vitpos_local``: submitit launchers
that wait for every job)."""
