"""One benchmark command for vitpos: each part prints Markdown tables of medians
over interleaved repetitions, with ratios against a named peer run in the same
process, the thread count and the torch version.

    python -m bench.run [part ...] [--quick] [--threads N] [--compile-all]
                        [--shapes vit_micro,vit_tiny] [--encodings a,b]

parts: step (training step vs timm), rope (RoPE on q, k vs rotary-embedding-torch,
timm, compiled rotate-half), data (an epoch of augmented batches vs torchvision's
ImageFolder + DataLoader), eval (throughput per resolution), memory (peak memory
per training step), sweep (a 4-job ``train.py -m`` sweep one job at a time vs
two side by side with a thread each; needs the CIFAR-10 copy), gpu
(bench/gpu.sh's checks; needs CUDA). Default: every part but sweep and gpu.
``--quick``: small shapes and subsets, a few minutes on 2 threads.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

PARTS = ("step", "rope", "data", "eval", "memory", "sweep", "gpu")


def split_list(text: str | None) -> list[str] | None:
    """``"a,b"`` -> ``["a", "b"]``; None stays None (the part's default)."""
    return [x.strip() for x in text.split(",") if x.strip()] if text else None


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    p.add_argument("parts", nargs="*", help=f"any of {', '.join(PARTS)}; default: all but sweep and gpu")
    p.add_argument("--quick", action="store_true", help="small shapes and subsets (a few minutes)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument("--compile-all", action="store_true", help="step: compile every encoding, not three")
    p.add_argument("--data-root", default="data/cifar10", help="data: a CIFAR-10 ImageFolder copy")
    p.add_argument("--shapes", default=None, help="step: model shapes, comma-separated (default: all)")
    p.add_argument("--encodings", default=None, help="step: comma-separated encodings (default: all; --quick: three)")
    a = p.parse_args(argv)
    unknown = [x for x in a.parts if x not in PARTS]
    if unknown:
        p.error(f"unknown part(s) {', '.join(unknown)}; valid: {', '.join(PARTS)}")
    if a.threads:
        torch.set_num_threads(a.threads)
    parts = a.parts or [x for x in PARTS if x not in ("sweep", "gpu")]
    print(f"# vitpos benchmarks: threads={torch.get_num_threads()} torch={torch.__version__} "
          f"cpu={torch.backends.cpu.get_cpu_capability()} quick={a.quick}")  # fmt: skip
    start = time.perf_counter()
    for part in parts:
        if part == "step":
            from .step import run

            run(a.quick, compile_all=a.compile_all, shapes=split_list(a.shapes), encodings=split_list(a.encodings))
        elif part == "rope":
            from .rope import run

            run(a.quick)
        elif part == "data":
            from .data import run

            run(a.quick, a.data_root)
        elif part == "eval":
            from .evaluation import run

            run(a.quick)
        elif part == "memory":
            from .memory import run

            run(a.quick)
        elif part == "sweep":
            from .sweep import run

            run(a.quick, a.data_root)
        elif part == "gpu":
            from .gpu import run

            sys.exit(run())
    print(f"\n(total {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
