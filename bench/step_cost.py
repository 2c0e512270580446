"""Training-step time of every image encoding relative to ``rope_2d``: the leaderboard's cost column.

    python -m bench.step_cost                          # print the table (about 3 minutes, 1 thread)
    python -m bench.step_cost write=true               # also write docs/results/step_cost.csv

The comparison's model (``vit_cpu_d96``: d96, 4 blocks, 3 heads, patch 4) at 32x32, batch 256,
forward + backward + AdamW, in the precision ``trainer.precision=auto`` trains in on this machine
(bf16 autocast where the CPU has AVX512-BF16, else float32), eager. Every encoding and the peer
(``rope_2d``) are timed in one process, interleaved round by round (bench/timing.py), so a slow
spell of a shared machine hits all rows alike; the ratio is what the table is for, the
milliseconds depend on the machine. The sweeps' wall minutes are no substitute: they came from
several hosts and days.
"""

from __future__ import annotations

import csv
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from vitpos.cli.options import option, parse_options
from vitpos.encodings import list_encodings
from vitpos.errors import UserError
from vitpos.models import VisionTransformer
from vitpos.runtime import cpu_supports_bf16, machine_kind
from vitpos.tasks.optim import build_optimizer

from .step import BASELINE, SHAPES, make_step
from .timing import interleaved_medians, use_threads

OUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "step_cost.csv"


@dataclass
class StepCostOptions:
    """Training-step time of every image encoding relative to rope_2d (see bench/step_cost.py).

    Examples:
      python -m bench.step_cost
      python -m bench.step_cost write=true
    """

    write: bool = option(False, "write docs/results/step_cost.csv (the leaderboard reads it)")
    threads: int = option(1, "torch threads", metavar="N")
    repeats: int = option(10, "interleaved rounds; the median is kept", metavar="N")
    batch: int = option(256, "images per step (the comparison's batch)", metavar="N")
    note: str = option("", "appended to the machine line (e.g. measured beside a training run)")


def measure(threads: int, repeats: int, batch: int) -> tuple[dict[str, float], str]:
    """Median seconds per step of each image encoding, and the machine line."""
    use_threads(threads)
    bf16 = cpu_supports_bf16()
    torch.manual_seed(0)
    x, y = torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))
    steps = {}
    for name in list_encodings(2):
        model = VisionTransformer(name, patch_size=4, drop_path=0.0, **SHAPES["vit_cpu_d96"])
        steps[name] = make_step(model, model, build_optimizer(model, 1e-4, 0.05), x, y, bf16)
    times = interleaved_medians(steps, repeats, desc="training step per encoding")
    precision = "bf16 autocast" if bf16 else "float32"
    machine = f"{machine_kind('cpu')}, {threads} thread(s), {precision}, eager, torch {torch.__version__.split('+')[0]}"
    return times, machine


def main(argv: list[str] | None = None) -> int:
    try:
        opts = parse_options(argv, StepCostOptions, prog="python -m bench.step_cost")
        times, machine = measure(opts.threads, opts.repeats, opts.batch)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    machine += f"; {opts.note}" if opts.note else ""
    rows = [(name, f"{1e3 * t:.1f}", f"{t / times[BASELINE]:.2f}") for name, t in sorted(times.items())]
    print(f"training step, vit_cpu_d96, batch {opts.batch}, 32x32; {machine}")
    for name, ms, ratio in rows:
        print(f"  {name:<18} {ms:>8} ms  {ratio} x {BASELINE}")
    if opts.write:
        with open(OUT, "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["encoding", "step_ms", f"x_{BASELINE}", "machine"])
            out.writerows([*row, machine] for row in rows)
        print(f"written to {OUT.relative_to(OUT.parents[2])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
