"""``python -m vitpos.benchmark encoding=NAME``: score one encoding against every committed result.

For each protocol (:data:`PROTOCOLS`: the full comparison, native 16 -> 32 px, aspect ratio) it
trains the encoding with the committed recipe and seeds (the protocol's experiment config; seed k
pairs with committed seed k), reads the committed runs of every other encoding from
``docs/results/<report>/runs`` (retraining none of them), and gives the new encoding's verdict in
its own family (:mod:`vitpos.benchmark.family`): primary, against ``rope_2d`` and ``none``;
secondary, against each committed encoding; the committed encodings' letters stay as committed.
Before training it prints the plan (:mod:`vitpos.benchmark.plan`): every run with its minutes on
this kind of machine, measured or estimated, what it is compared with, and the total. A rerun
continues where it stopped (finished runs are read, an interrupted one resumes from its last
epoch); SIGINT and SIGTERM stop it resumably, with exit code 130 and 143 as ``train.py``.

Only committed runs of the same budget and precision are compared with. Where this machine trains
in another precision (an AVX2-only CPU: float32; the committed runs: bf16), the plan says so and
trains the ``baselines`` (default ``none``, ``rope_2d``, ``cpe``) here as well, and compares
against those only; a plan that would compare with nothing is refused before it trains.
"""

from __future__ import annotations

import contextlib
import shlex
import signal
import sys
from pathlib import Path

from vitpos.benchmark.options import PROTOCOLS, BenchmarkOptions, check_options
from vitpos.benchmark.plan import Plan, make_plan, show
from vitpos.benchmark.score import score
from vitpos.cli.options import parse_options
from vitpos.encodings import get_encoding_class
from vitpos.errors import UserError
from vitpos.run.signals import Stopped
from vitpos.tasks.build import load_plugin

__all__ = ["PROTOCOLS", "BenchmarkOptions", "Plan", "main", "make_plan", "show"]


def check_configs(plans: list[Plan]) -> None:
    """The config check of ``train.py`` (vitpos/validate.py) on one run of each encoding and protocol,
    so that a bad override is refused before the first run trains."""
    from vitpos.errors import InputError
    from vitpos.validate import validate

    for p in plans:
        for cfg in {r.encoding: r.cfg for r in p.runs}.values():
            try:
                validate(cfg.copy())
            except InputError as err:
                raise UserError("overrides", str(err)) from None


@contextlib.contextmanager
def stop_on_signals():
    """SIGINT and SIGTERM raise :class:`vitpos.run.signals.Stopped` (exit 128 + signal) in the main
    thread: training stops at once, keeps its last checkpoint, and a rerun resumes. Lightning calls
    this handler after its own for SIGTERM, which alone would only stop the current run's fit."""

    def stop(signum, frame):
        raise Stopped(signum)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    except Stopped as stopped:
        command = shlex.join(["python", "-m", "vitpos.benchmark", *sys.argv[1:]])
        print(f"stopped by {signal.Signals(stopped.signum).name}. To resume, run the same command again: {command}")
        raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main(argv: list[str] | None = None) -> int:
    usage = "encoding=NAME [key=value ...]"
    opts = parse_options(argv, BenchmarkOptions, prog="python -m vitpos.benchmark", usage=usage)
    check_options(opts)
    load_plugin(opts.module)
    try:
        get_encoding_class(opts.encoding)
    except KeyError as err:
        raise UserError("encoding", str(err.args[0]).split(";")[0], "a plug-in needs module=<file.py>") from None
    out = Path(opts.out)
    with stop_on_signals():  # planning composes a config per run: seconds to minutes
        plans = [make_plan(opts, protocol) for protocol in opts.protocols]
        check_configs(plans)
        print(show(plans, out), flush=True)
        lines = [line for p in plans for line in score(p, out, opts.encoding)]
    print("\n".join(["", f"{opts.encoding} against the committed results:", *lines]))
    return 0
