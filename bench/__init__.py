"""vitpos benchmarks: ``python -m bench.run [part ...] [--quick] [--threads N]`` (see bench/run.py)."""
