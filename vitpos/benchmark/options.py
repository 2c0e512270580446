"""The benchmark's options and the checks that refuse a bad one before anything is composed,
trained or written: each refusal is one ``error: <option>: <what> (<fix>)`` line (exit 2).

What each option must mean: ``seeds`` a count of at least 1 (0 is not "the committed count"),
``protocols`` at least one, ``results`` a folder holding the committed report of every protocol
asked for, ``out`` a folder this process can create and write, ``baselines`` image encodings of
the registry.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from vitpos.cli.options import option
from vitpos.encodings import list_encodings
from vitpos.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
#: name -> (the experiment config that is its recipe, the committed report it is scored against)
PROTOCOLS = {
    "full": ("compare_cifar_full", "cifar10_full"),
    "native": ("extrapolation_native", "extrapolation_native"),
    "aspect": ("extrapolation_aspect", "extrapolation_aspect"),
}


@dataclass
class BenchmarkOptions:
    """Score one encoding against every committed result (see vitpos/benchmark/__init__.py).

    Examples:
      python -m vitpos.benchmark encoding=rope_2d_mixed protocols=[aspect]
      python -m vitpos.benchmark encoding=scaled_sincos module=docs/examples/my_enc.py protocols=[aspect]
    """

    encoding: str = option(help="the encoding to score (a plug-in's name with module=)", metavar="NAME",
                           example="rope_2d_mixed")  # fmt: skip
    module: str | None = option(None, "a plug-in's .py file or module", metavar="FILE|MODULE")
    protocols: list[str] = option(list(PROTOCOLS), "which committed protocols", metavar="[NAME,...]",
                                  choices=list(PROTOCOLS))  # fmt: skip
    baselines: list[str] = option(["none", "rope_2d", "cpe"], "retrained here where no committed run shares this "
                                  "machine's precision and the budget", metavar="[NAME,...]")  # fmt: skip
    seeds: int | None = option(None, "seeds per encoding (seed k pairs with committed seed k)",
                               default_text="the protocol's committed seeds")  # fmt: skip
    out: str = option("runs/benchmark", "the runs and one report per protocol", metavar="DIR")
    results: str = option(str(ROOT / "docs" / "results"), "the committed reports and their run snapshots",
                          metavar="DIR", default_text="docs/results")  # fmt: skip
    overrides: list[str] = option([], "more Hydra overrides for every run (a smaller budget, another data.root)",
                                  metavar="[KEY=VALUE,...]")  # fmt: skip


def check_options(opts: BenchmarkOptions) -> None:
    """Refuse an option that cannot mean what it says (see the module docstring), before any work."""
    if opts.seeds is not None and opts.seeds < 1:
        raise UserError("seeds", f"{opts.seeds} is not a seed count",
                        "give 1 or more, or leave seeds= out for the protocol's committed seeds")  # fmt: skip
    if not opts.protocols:
        raise UserError("protocols", "empty: nothing to score",
                        f"name one or more of {', '.join(PROTOCOLS)}, or leave protocols= out for all")  # fmt: skip
    images = list_encodings(grid_dims=2)
    unknown = [b for b in opts.baselines if b not in images]
    if unknown:
        raise UserError("baselines", f"unknown {', '.join(unknown)}",
                        f"valid: {', '.join(images)}; baselines=[] to retrain none")  # fmt: skip
    check_results(Path(opts.results), opts.protocols)
    check_out(Path(opts.out))


def check_results(results: Path, protocols: list[str]) -> None:
    """``results`` holds ``<report>/runs`` for every protocol asked for (docs/results does)."""
    fix = "the committed reports are in docs/results: leave results= out"
    if not results.is_dir():
        raise UserError("results", f"{results} is {'a file' if results.exists() else 'not a folder'}", fix)
    missing = [f"{name} ({PROTOCOLS[name][1]}/runs)" for name in protocols
               if not (results / PROTOCOLS[name][1] / "runs").is_dir()]  # fmt: skip
    if missing:
        raise UserError("results", f"{results} holds no committed report of {', '.join(missing)}", fix)


def check_out(out: Path) -> None:
    """``out`` is a folder (or can become one) that this process can write: probed with a temporary
    file in it or in the nearest folder above it that exists, removed at once (a read-only disk
    refuses even root)."""
    fix = "give a folder you can write with out=DIR"
    if out.exists() and not out.is_dir():
        raise UserError("out", f"{out} is a file", fix)
    here = out
    while not here.exists():
        here = here.parent
    if not here.is_dir():
        raise UserError("out", f"{here} is a file, so {out} cannot be made", fix)
    try:
        handle, probe = tempfile.mkstemp(dir=here, prefix=".vitpos-write-probe-")
        os.close(handle)
        os.unlink(probe)
    except OSError as err:
        raise UserError("out", f"{here} is not writable ({err.strerror})", fix) from None
