"""A run folder's life: its identity, claim, resume, status and checkpoints; a sweep's jobs, processes and signals."""
