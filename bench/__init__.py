"""vitpos benchmarks: ``python -m bench.run [PART ...] [quick=true] [threads=N]`` (see bench/run.py)."""
