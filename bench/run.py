"""One benchmark command for vitpos: each part prints Markdown tables of medians
over interleaved repetitions, with ratios against a named peer run in the same
process, the thread count and the torch version.

    python -m bench.run [PART ...] [quick=true] [threads=N] [compile_all=true]
                        [shapes=[vit_micro,vit_tiny]] [encodings=[a,b]] [data_root=DIR]

The parts and options are :class:`BenchOptions` (``python -m bench.run --help``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from bench.timing import use_threads
from vitpos.cli.console import run_main
from vitpos.cli.options import option, parse_options

PARTS = ("step", "rope", "data", "eval", "memory", "sweep", "gpu")


@dataclass
class BenchOptions:
    """Benchmarks of vitpos against named peers measured in the same run, printed as Markdown
    tables (medians over interleaved repetitions, ratios against the peer).

    Parts (bare words before or between the options, or parts=[...]):
      step    training step (forward + backward + AdamW) per encoding vs timm's ViT
      rope    RoPE on q and k vs rotary-embedding-torch, timm and a compiled rotate-half
      data    an epoch of augmented batches vs torchvision's ImageFolder + DataLoader
      eval    evaluation throughput per test resolution
      memory  peak memory of a training step per encoding
      sweep   a 4-job train.py -m sweep, one job at a time vs two side by side (needs data_root)
      gpu     the bf16 + compile step table and time to accuracy (needs CUDA; bench/gpu.sh)
    Default: every part but sweep and gpu. quick=true: small shapes and subsets, a few
    minutes on 2 threads.

    Examples:
      python -m bench.run quick=true threads=2
      python -m bench.run step rope threads=2          # the full step and rope tables (minutes)
      python -m bench.run step shapes=[vit_micro] encodings=[rope_2d,learned_1d]
    """

    parts: list[str] = option([], "the parts to run", metavar="[PART,...]", words=True, choices=list(PARTS),
                              default_text="all but sweep and gpu")  # fmt: skip
    quick: bool = option(False, "small shapes and subsets (a few minutes)")
    threads: int | None = option(None, "torch threads", default_text="torch's choice")
    compile_all: bool = option(False, "step: compile every encoding, not one per kind")
    data_root: str = option("data/cifar10", "data, sweep: a CIFAR-10 ImageFolder copy", metavar="DIR")
    shapes: list[str] | None = option(None, "step: model shapes", metavar="[NAME,...]", example="[vit_micro]",
                                      default_text="all; quick: vit_micro")  # fmt: skip
    encodings: list[str] | None = option(None, "step: encodings", metavar="[NAME,...]", example="[rope_2d]",
                                         default_text="all; quick: one per kind")  # fmt: skip
    gpu_minutes: float = option(6.0, "gpu: time limit of the time-to-accuracy run; 0 skips it")
    bf16: bool | None = option(None, "step, eval: time bf16 autocast rows too",
                               default_text="where the CPU has native bf16 (AVX512-BF16 or AMX)")  # fmt: skip


def bench_precisions(bf16: bool | None) -> list[str]:
    """The precisions the step and eval tables time: fp32, plus bf16 autocast when asked
    (``bf16=true``) or, by default, where the CPU has native bf16 (as ``trainer.precision=auto``)."""
    from vitpos.runtime import cpu_supports_bf16

    return ["fp32", "bf16"] if (cpu_supports_bf16() if bf16 is None else bf16) else ["fp32"]


def main(argv: list[str] | None = None) -> int:
    a = parse_options(argv, BenchOptions, prog="python -m bench.run")
    parts = a.parts or [x for x in PARTS if x not in ("sweep", "gpu")]
    if "step" in parts:  # before anything runs: a typo in a row filter must not cost the other parts' minutes
        from .step import check_rows

        check_rows(a.shapes, a.encodings)
    use_threads(a.threads)
    print(f"# vitpos benchmarks: threads={torch.get_num_threads()} torch={torch.__version__} "
          f"cpu={torch.backends.cpu.get_cpu_capability()} quick={a.quick}")  # fmt: skip
    precisions = bench_precisions(a.bf16)
    if "bf16" not in precisions and {"step", "eval"} & set(parts):
        print(
            "# bf16 rows left out: this CPU has no native bf16 (AVX512-BF16/AMX) and emulates it ~8x slower "
            "than fp32, so vitpos trains in fp32 here (trainer.precision=auto); bf16=true times them anyway"
        )
    start = time.perf_counter()
    for part in parts:
        if part == "step":
            from .step import run

            run(a.quick, compile_all=a.compile_all, shapes=a.shapes, encodings=a.encodings, precisions=precisions)
        elif part == "rope":
            from .rope import run

            run(a.quick)
        elif part == "data":
            from .data import run

            run(a.quick, a.data_root)
        elif part == "eval":
            from .evaluation import run

            run(a.quick, precisions=precisions)
        elif part == "memory":
            from .memory import run

            run(a.quick)
        elif part == "sweep":
            from .sweep import run

            run(a.quick, a.data_root)
        elif part == "gpu":
            from .gpu import run

            return run(a.gpu_minutes, a.data_root)
    print(f"\n(total {time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    run_main(main)  # a user error (unknown part, option or row filter): one line, exit 2
