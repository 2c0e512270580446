"""What the benchmark will train for one protocol, what it compares with, and the minutes it costs here.

**Comparators.** A committed run is compared with only when it finished and shares this run's
budget (:meth:`vitpos.compare.protocol.Protocol.budget`: data, epochs, sizes, limits) and its
precision (``run.precision``, which ``trainer.precision=auto`` resolves per machine kind). Where no
committed run qualifies, the ``baselines`` are retrained here under the same config, and the plan
says why; with no baseline left, the plan would compare with nothing and is refused.

**Minutes.** Every run the plan trains gets minutes, with their basis:

- *measured*: the mean of the committed runs of this budget trained on this machine kind (the
  encoding's own runs where it has some, else all encodings');
- *estimated*: those of another kind, times the range of the ratios of this kind's minutes to that
  kind's over every configuration the committed reports trained on both kinds
  (:func:`vitpos.benchmark.minutes.kind_ratio`);
- otherwise the plan says that it has no basis for this kind.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

from vitpos import CONFIG_DIR
from vitpos.benchmark.minutes import Minutes, encoding_of, run_minutes, snapshot_runs
from vitpos.benchmark.options import PROTOCOLS, BenchmarkOptions
from vitpos.compare.protocol import Protocol
from vitpos.compare.read import Run
from vitpos.config import HYDRA_BASE  # importing it registers the schemas the configs start from
from vitpos.config.encodings import builtin_names
from vitpos.errors import UserError
from vitpos.run.sweep import job_config
from vitpos.runtime import machine_kind, trainer_precision


@dataclass
class Planned:
    """One run to train: its encoding, seed, config and expected minutes here; ``why``: why a
    baseline is retrained ("" for the encoding scored)."""

    encoding: str
    seed: int
    cfg: object
    minutes: Minutes
    why: str = ""


@dataclass
class Plan:
    """What one protocol will train and compare against."""

    protocol: str
    kind: str  # this machine's kind (vitpos.runtime.machine_kind)
    budget: str
    runs: list[Planned]
    committed: list[Run]  # the committed runs compared with (same budget and precision, complete)
    note: str = ""
    seeds: list[int] = field(default_factory=list)

    @property
    def configs(self) -> list:
        return [(r.encoding, r.seed, r.cfg) for r in self.runs]


def compose(experiment: str, encoding: str, module: str | None, seed: int, out: Path, extra: list[str]):
    """The config one run of ``encoding`` in ``experiment`` trains with, as ``train.py`` composes it
    (the same run folder); an override Hydra refuses is one ``overrides:`` error."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException

    from vitpos.cli.hydra_errors import override_error

    has_yaml = module is None and (
        (CONFIG_DIR / "encoding" / f"{encoding}.yaml").exists() or encoding in builtin_names()
    )
    chosen = [f"encoding={encoding}"] if has_yaml else ["encoding=plugin", f"encoding.name={encoding}"]
    chosen += [f"encoding.module={module}"] if module else []
    overrides = [f"experiment={experiment}", *chosen, f"seed={seed}", f"run.root={out}", *extra]
    with initialize_config_dir(str(CONFIG_DIR), **HYDRA_BASE):
        try:
            composed = hydra_compose("train", overrides=overrides, return_hydra_config=True)
        except (HydraException, ValueError) as err:
            raise UserError("overrides", str(override_error(err, CONFIG_DIR, extra))) from None
    return job_config(composed)  # as a job of train.py: run.model named by the model config chosen


def committed_runs(results: Path, report: str) -> list[Run]:
    """The committed snapshot runs of a report, each with its ``metrics.json`` (no event file is read)."""
    folder = results / report / "runs"
    return list(snapshot_runs(folder)) if folder.is_dir() else []


def seeds_of(experiment: str) -> list[int]:
    """The seeds an experiment sweeps (``hydra.sweeper.params.seed``)."""
    cfg = OmegaConf.load(CONFIG_DIR / "experiment" / f"{experiment}.yaml")
    return [int(s) for s in str(OmegaConf.select(cfg, "hydra.sweeper.params.seed", default="0")).split(",")]


def recorded(run) -> dict:
    """What a committed run recorded in ``run`` of its saved config (:func:`vitpos.run.identity.record`)."""
    return ((run.hparams or {}).get("cfg") or {}).get("run") or {}


def complete(run) -> bool:
    return bool(run.status) and run.status.get("status") == "complete"


def make_plan(opts: BenchmarkOptions, protocol: str) -> Plan:
    """The plan of ``protocol`` (see the module docstring); refuses one that would compare with nothing."""
    experiment, report = PROTOCOLS[protocol]
    seeds = list(range(opts.seeds)) if opts.seeds is not None else seeds_of(experiment)
    out = Path(opts.out)
    probe = compose(experiment, opts.encoding, opts.module, seeds[0], out, opts.overrides)
    plain = OmegaConf.to_container(probe, resolve=True)
    here = str(trainer_precision(plain["trainer"]))
    kind = machine_kind(plain["trainer"].get("accelerator", "auto"))
    budget = Protocol.of_config(plain).budget()
    runs = [r for r in committed_runs(Path(opts.results), report) if complete(r)]
    this_budget = [r for r in runs if r.budget == budget]
    others = [r for r in this_budget if encoding_of(r) != opts.encoding]  # its own runs are scored anew
    same = [r for r in others if recorded(r).get("precision") == here]
    encodings, note, why = [opts.encoding], "", ""
    if not same:
        why, fix = retrain_reason(protocol, here, kind, budget, runs, others)
        baselines = [b for b in opts.baselines if b != opts.encoding]
        if not baselines:
            raise UserError("baselines", f"{why}: {opts.encoding} would be compared with nothing",
                            f"pass baselines=[none,rope_2d,cpe] to retrain them here, or {fix}")  # fmt: skip
        note = f"{protocol}: {why}: comparing against {', '.join(baselines)} retrained here, not the committed runs"
        encodings += baselines
    planned = []
    for name in encodings:
        minutes = run_minutes(name, kind, this_budget, Path(opts.results))
        first = probe if name == opts.encoding else compose(experiment, name, None, seeds[0], out, opts.overrides)
        for seed in seeds:
            cfg = copy.deepcopy(first)  # the seed is read lazily (interpolations): the same config as seed=<k>
            cfg.seed = seed
            planned.append(Planned(name, seed, cfg, minutes, "" if name == opts.encoding else why))
    return Plan(protocol, kind, budget, planned, same, note, seeds)


def retrain_reason(protocol, here, kind, budget, runs, others) -> tuple[str, str]:
    """(why no committed run can be compared with, the option that would let one be); ``others``: the
    committed runs of other encodings at this budget."""
    if others:
        theirs = ", ".join(sorted({str(recorded(r).get("precision")) for r in others}))
        kinds = ", ".join(sorted({str(recorded(r).get("machine")) for r in others}))
        return (f"this machine trains in {here} ({kind}), the committed {protocol} runs in {theirs} ({kinds})",
                f"run on a machine where trainer.precision=auto gives {theirs}")  # fmt: skip
    if any(r.budget == budget for r in runs):
        return (f"the committed {protocol} runs of this budget are all of the encoding scored",
                "give results= a folder that holds other encodings' runs")  # fmt: skip
    if runs:
        return (f"no committed {protocol} run has this budget ({budget})",
                "drop the overrides that change the budget")  # fmt: skip
    return f"no finished committed {protocol} run", "give results= the folder of the committed reports"


def show(plans: list[Plan], out: Path) -> str:
    """The plan as printed before any training: per protocol the runs, their seeds and minutes, what
    they are compared with, and the total."""
    lines = ["plan:"]
    for p in plans:
        names = list(dict.fromkeys(r.encoding for r in p.runs))
        seeds = ", ".join(map(str, p.seeds))
        lines.append(f"  {p.protocol}: {len(p.runs)} runs ({', '.join(names)}; seeds {seeds}, each paired with the "
                     f"committed seed of its number); against {len(p.committed)} committed runs; "
                     f"report: {out / p.protocol / 'report'}")  # fmt: skip
        for name in names:
            each = [r for r in p.runs if r.encoding == name]
            retrained = "; retrained, see the note" if each[0].why else ""
            lines.append(f"    {name} × {len(each)}: {each[0].minutes.text()}{retrained}")
        for basis in dict.fromkeys(r.minutes.basis for r in p.runs):
            lines.append(f"    minutes on {p.kind}: {basis}")
        lines += [f"  note: {p.note}"] if p.note else []
    every = [r.minutes for p in plans for r in p.runs]
    known = [m for m in every if m.low is not None]
    low, high = sum(m.low for m in known), sum(m.high for m in known)
    span = f"{low:.0f}" if round(low) == round(high) else f"{low:.0f}-{high:.0f}"
    unknown = f"; {len(every) - len(known)} runs without an estimate" if len(known) < len(every) else ""
    lines.append(f"  expected: about {span} minutes for {len(known)} runs on this machine{unknown} "
                 "(finished runs are read, not trained)")  # fmt: skip
    return "\n".join(lines)
