"""``python -m vitpos.benchmark encoding=NAME``: score one encoding against every committed result.

For each protocol (:data:`PROTOCOLS`: the full comparison, native 16 -> 32 px, aspect ratio) it
trains the encoding with the committed recipe and seed count (the protocol's experiment config),
reads the committed runs of every other encoding from ``docs/results/<report>/runs`` (retraining
none of them), and writes one report per protocol with the new encoding beside them: its mean,
its 95% interval and the committed encodings it cannot be told apart from
(:mod:`vitpos.compare.stats`). Before training it prints the plan (runs, expected minutes on this
kind of machine, where results go); a rerun continues where it stopped (finished runs are read,
an interrupted one resumes from its last epoch).

Precision: the committed runs name the precision they trained in (``run.precision``). Where this
machine trains in another (an AVX2-only CPU: float32; the committed runs: bf16), comparing with
them would mix precisions, so the command says so in one line and trains the ``baselines``
(default ``none``, ``rope_2d``, ``cpe``) here as well, and compares against those only; with
``baselines=[]`` it refuses instead.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

import vitpos.config  # noqa: F401  (registers the schemas the configs start from)
from vitpos import CONFIG_DIR
from vitpos.cli.options import option, parse_options
from vitpos.compare import compare
from vitpos.compare.read import find_runs, read_run
from vitpos.compare.stats import shares_group
from vitpos.encodings import get_encoding_class
from vitpos.errors import UserError
from vitpos.run.identity import run_dir
from vitpos.runtime import machine_kind, trainer_precision
from vitpos.tasks.build import load_plugin

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
                                  "machine's precision", metavar="[NAME,...]")  # fmt: skip
    seeds: int | None = option(None, "seeds per encoding", default_text="the protocol's committed count")
    out: str = option("runs/benchmark", "the runs and one report per protocol", metavar="DIR")
    results: str = option(str(ROOT / "docs" / "results"), "the committed reports and their run snapshots",
                          metavar="DIR", default_text="docs/results")  # fmt: skip
    overrides: list[str] = option([], "more Hydra overrides for every run (a smaller budget, another data.root)",
                                  metavar="[KEY=VALUE,...]")  # fmt: skip


def compose(experiment: str, encoding: str, module: str | None, seed: int, out: Path, extra: list[str]):
    """The config one run of ``encoding`` in ``experiment`` trains with (as ``train.py`` composes it)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    has_yaml = (CONFIG_DIR / "encoding" / f"{encoding}.yaml").exists() and module is None
    chosen = [f"encoding={encoding}"] if has_yaml else ["encoding=plugin", f"encoding.name={encoding}"]
    chosen += [f"encoding.module={module}"] if module else []
    overrides = [f"experiment={experiment}", *chosen, f"seed={seed}", f"run.root={out}", *extra]
    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        return hydra_compose("train", overrides=overrides)


def committed_runs(results: Path, report: str) -> list:
    """The committed snapshot runs of a report (:func:`vitpos.compare.read.find_runs`)."""
    folder = results / report / "runs"
    return [read_run(r) for r in find_runs(folder)] if folder.is_dir() else []


def seeds_of(experiment: str) -> list[int]:
    """The seeds an experiment sweeps (``hydra.sweeper.params.seed``)."""
    cfg = OmegaConf.load(CONFIG_DIR / "experiment" / f"{experiment}.yaml")
    return [int(s) for s in str(OmegaConf.select(cfg, "hydra.sweeper.params.seed", default="0")).split(",")]


def recorded(run) -> dict:
    """What a committed run recorded in ``run`` of its saved config (:func:`vitpos.run.identity.record`)."""
    return ((run.hparams or {}).get("cfg") or {}).get("run") or {}


def precision_of(run) -> str | None:
    return recorded(run).get("precision")


def machine_of(run) -> str | None:
    return recorded(run).get("machine")


@dataclass
class Plan:
    """What one protocol will train and compare against."""

    protocol: str
    configs: list  # (encoding, seed, config)
    committed: list[Path]  # run folders of committed runs to compare against
    minutes: float | None  # expected minutes a run on this kind of machine (committed runs of the same kind)
    note: str = ""


def plan(opts: BenchmarkOptions, protocol: str) -> Plan:
    experiment, report = PROTOCOLS[protocol]
    seeds = list(range(opts.seeds)) if opts.seeds else seeds_of(experiment)
    out = Path(opts.out)
    probe = compose(experiment, opts.encoding, opts.module, seeds[0], out, opts.overrides)
    here = str(trainer_precision(OmegaConf.to_container(probe.trainer, resolve=True)))
    runs = [r for r in committed_runs(Path(opts.results), report) if r.status and r.status.get("status") == "complete"]
    same = [r for r in runs if precision_of(r) == here]
    encodings = [opts.encoding]
    note = ""
    if runs and not same:
        theirs = ", ".join(sorted({str(precision_of(r)) for r in runs}))
        if not opts.baselines:
            raise UserError("baselines", f"this machine trains in {here}, the committed {protocol} runs in {theirs}",
                            "pass baselines=[none,rope_2d,cpe] to retrain anchors here, or run on a machine "
                            f"where trainer.precision=auto gives {theirs}")  # fmt: skip
        note = (f"{protocol}: this machine trains in {here}, the committed runs in {theirs}: comparing against "
                f"{', '.join(opts.baselines)} retrained here, not the committed runs")  # fmt: skip
        encodings += [b for b in opts.baselines if b != opts.encoding]
    configs = [(e, s, compose(experiment, e, opts.module if e == opts.encoding else None, s, out, opts.overrides))
               for e in encodings for s in seeds]  # fmt: skip
    kind = machine_kind(probe.trainer.get("accelerator", "auto"))
    timed = [r.status["metrics"] for r in same if machine_of(r) == kind]
    minutes = sum(m.get("time/fit_min", 0) + m.get("time/eval_min", 0) for m in timed) / len(timed) if timed else None
    return Plan(protocol, configs, [r.path for r in same], minutes, note)


def show(plans: list[Plan], out: Path) -> str:
    lines = ["plan:"]
    for p in plans:
        names = sorted({e for e, _, _ in p.configs})
        each = f"about {p.minutes:.0f} min each on this kind of machine" if p.minutes else "minutes unknown here"
        lines.append(f"  {p.protocol}: {len(p.configs)} runs ({', '.join(names)}; {each}); "
                     f"against {len(p.committed)} committed runs; report: {out / p.protocol / 'report'}")  # fmt: skip
        lines += [f"  note: {p.note}"] if p.note else []
    total = [p.minutes * len(p.configs) for p in plans if p.minutes]
    lines.append(f"  expected: about {sum(total):.0f} minutes (finished runs are read, not trained)" if total else "")
    return "\n".join(line for line in lines if line)


def score(p: Plan, out: Path, encoding: str) -> str:
    """Train what ``p`` plans (one line per run), then the report of the new runs beside the committed ones."""
    from vitpos.train import train

    folders = []
    for i, (name, seed, cfg) in enumerate(p.configs, 1):
        print(f"[{p.protocol} {i}/{len(p.configs)}] {name} seed {seed}", flush=True)
        metrics = train(cfg)  # a finished run is read, an interrupted one resumes
        folders.append(run_dir(cfg).parent)
        acc = metrics.get("test/acc", float("nan"))
        print(f"[{p.protocol} {i}/{len(p.configs)}] {name} seed {seed}: test/acc {acc:.4f}", flush=True)
    combined = out / p.protocol / "combined"  # the runs the report reads, without their checkpoints
    shutil.rmtree(combined, ignore_errors=True)
    # <model>/<label> folders, every seed: the committed ones first, then this machine's over them (an
    # encoding whose runs are committed already, scored again, keeps one row, its runs from here)
    for folder in [*dict.fromkeys(c.parent for c in p.committed), *dict.fromkeys(folders)]:
        shutil.copytree(folder, combined / folder.parent.name / folder.name,
                        ignore=shutil.ignore_patterns("*.ckpt"), dirs_exist_ok=True)  # fmt: skip
    result = compare(combined, out / p.protocol / "report")
    return row_line(result.groups, folders[0].name, p.protocol)


def row_line(groups, label: str, protocol: str) -> str:
    """``protocol: test/acc mean ± std (n), 95% interval, not distinguishable from: ...`` of ``label``."""
    row = groups[groups["label"] == label].iloc[0]
    section = groups[(groups["budget"] == row["budget"]) & (groups["model"] == row["model"])]
    mine = row.get("test/acc_group")
    tied = sorted(r["label"].rsplit("-", 1)[0] for _, r in section.iterrows()
                  if r["label"] != label and shares_group(r.get("test/acc_group"), mine))  # fmt: skip
    low, high = row.get("test/acc_ci_low"), row.get("test/acc_ci_high")
    interval = f"95% interval {100 * low:.1f}-{100 * high:.1f}" if low == low and low is not None else "one seed"
    n = int(row["seeds"])
    spread = f" ± {100 * row['test/acc_std']:.1f}" if n > 1 else ""
    if len(section) == 1:
        return (f"{protocol}: test/acc {100 * row['test/acc_mean']:.1f}{spread} ({n} seed{'s' * (n > 1)}); no "
                "committed run shares its budget (overrides=?): compared with nothing")  # fmt: skip
    tied_text = ", ".join(tied) if tied else "no other encoding (resolved from all)"
    return (f"{protocol}: test/acc {100 * row['test/acc_mean']:.1f}{spread} ({n} seed{'s' * (n > 1)}), {interval}; "
            f"not distinguishable from: {tied_text}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    usage = "encoding=NAME [key=value ...]"
    opts = parse_options(argv, BenchmarkOptions, prog="python -m vitpos.benchmark", usage=usage)
    load_plugin(opts.module)
    try:
        get_encoding_class(opts.encoding)
    except KeyError as err:
        raise UserError("encoding", str(err.args[0]).split(";")[0], "a plug-in needs module=<file.py>") from None
    out = Path(opts.out)
    plans = [plan(opts, protocol) for protocol in opts.protocols]
    print(show(plans, out), flush=True)
    lines = [score(p, out, opts.encoding) for p in plans]
    print("\n".join(["", f"{opts.encoding} against the committed results:", *lines]))
    return 0
