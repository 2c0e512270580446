"""Timing and printing shared by the benchmark parts.

Medians over *interleaved* repetitions: every contender runs once per round,
round after round, so a slow spell on a shared machine hits all of them alike
instead of one contender's whole series. Ratios are against a named peer
measured in the same process.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from tqdm.auto import tqdm

from vitpos.errors import UserError
from vitpos.tables import markdown_table


def use_threads(threads: int | None) -> None:
    """Time with ``threads`` intra-op threads (None: torch's choice); fewer than one is refused."""
    if threads is None:
        return
    if threads < 1:
        raise UserError("threads", f"{threads} is not a thread count", "give 1 or more, or leave it out")
    torch.set_num_threads(threads)


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def interleaved_medians(
    fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 2, desc: str = "timing"
) -> dict[str, float]:
    """Median seconds per call of each function, over ``repeats`` interleaved rounds (a progress
    bar on stderr counts the warm-up and the rounds: a full table takes minutes)."""
    for fn in tqdm(fns.values(), desc=f"{desc}: warm-up (compiles)", leave=False):
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in tqdm(range(repeats), desc=f"{desc}: {len(fns)} rows x {repeats} rounds", leave=False):
        for name, fn in fns.items():
            _sync()
            start = time.perf_counter()
            fn()
            _sync()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def header(title: str) -> None:
    print(f"\n## {title}")
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    print(f"threads={torch.get_num_threads()}  torch={torch.__version__}  device={device}")


def table(columns: list[str], rows: list[list]) -> None:
    """A Markdown table (pastes into the docs as printed)."""
    print(markdown_table(columns, rows, pad=True))


def ratio_rows(times: dict[str, float], peer: str, items: int | None = None, unit: str = "img/s") -> list[list]:
    """Rows name | ms | rate | x vs peer (> 1: faster than the peer)."""
    rows = []
    for name, t in times.items():
        rate = f"{items / t:,.0f}" if items else "-"
        rows.append([name, f"{t * 1e3:.2f}", rate, f"{times[peer] / t:.2f}x"])
    return rows


def matmul_gflops(dtype: torch.dtype, n: int = 2048, repeats: int = 5) -> float:
    """Measured GFLOP/s of an n x n matmul in ``dtype``: the practical ceiling."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    t = interleaved_medians({"mm": lambda: a @ b}, repeats, warmup=2)["mm"]
    return 2 * n**3 / t / 1e9
