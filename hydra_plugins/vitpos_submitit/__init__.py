"""vitpos's Hydra launchers (:mod:`.tolerant`): submitit launchers that wait for every job."""
