"""Timing helpers for the benchmarks: median of repeated runs after warm-up."""

from __future__ import annotations

import statistics
import time

import torch


def median_time(fn, repeats: int = 20, warmup: int = 3) -> float:
    """Median seconds per call of ``fn`` (synchronizing CUDA when used)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def report(rows: list[tuple[str, float]], peer: str, items: int | None = None, unit: str = "img") -> None:
    """Print each row's time, its throughput (``items`` per call) and its ratio to the named peer's row."""
    ref = dict(rows)[peer]
    width = max(len(n) for n, _ in rows)
    print(f"threads={torch.get_num_threads()}  torch={torch.__version__}")
    for name, t in rows:
        rate = f"  {items / t:8.0f} {unit}/s" if items else ""
        print(f"{name:<{width}}  {t * 1e3:9.3f} ms{rate}   {ref / t:5.2f}x vs {peer}")
