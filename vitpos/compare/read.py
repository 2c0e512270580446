"""Finding and reading the runs and Hydra jobs that ``vitpos.compare`` reports on.

A run is any folder holding TensorBoard event files (possibly in ``version_*/``)
or a ``metrics.json``, or named ``seed<k>``, at any depth below the folder
given; its task, model and label come from the folder names and the config
saved in ``hparams.yaml``, and so does its training protocol
(:mod:`vitpos.compare.protocol`). Nothing here unpickles anything: event files
are protobufs, ``hparams.yaml`` is read with ``yaml.safe_load`` and checkpoints
are never opened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml
from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from vitpos.compare.protocol import Protocol
from vitpos.run.identity import run_dir
from vitpos.run.status import read_status
from vitpos.run.sweep import OUTCOME_FILE
from vitpos.validate import validate

SEED_DIR = re.compile(r"^seed(\d+)(.*)$")  # seed0, or seed0<suffix>
PARAM_KEYS = ("params", "num_params", "n_params")
EVENTS = "events.out.tfevents.*"
ERROR_LINE = re.compile(r"^(?:[\w.]*(?:Error|Exception)\b.*|error: .*|.*Error executing job.*)$")


@dataclass
class Run:
    """One seed of one (task, model, label): its scalars as (wall_time, step, value) rows."""

    task: str
    label: str
    seed: int | None
    path: Path
    model: str = ""
    budget: str = ""  # the protocol's sentence, the key of the run's report section ("" without a config)
    protocol: Protocol | None = None
    scalars: dict[str, pd.DataFrame] = field(default_factory=dict)
    hparams: dict = field(default_factory=dict)
    status: dict | None = None  # metrics.json
    error: str | None = None
    recursive: bool = True  # whether event files in subfolders belong to this run

    def last(self, tag: str) -> float | None:
        s = self.scalars.get(tag)
        return None if s is None or s.empty else float(s["value"].iloc[-1])


@dataclass
class Job:
    """One Hydra multirun job folder: its overrides, the run folder its config maps to
    (None when that does not exist), and why it failed (None when it did not)."""

    path: Path
    overrides: list[str]
    error: str | None
    run: Path | None = None


# ------------------------------------------------------------------- finding
def run_folders(runs_dir: Path, skip: Path | None = None) -> list[tuple[Path, bool]]:
    """(folder, whether its run owns the folders below it) for every folder below ``runs_dir``
    holding event files or ``metrics.json`` (``version_*`` folded into its parent), or named ``seed<k>``.

    Everything inside a ``seed<k>`` folder belongs to that run (``version_*``,
    ``extrapolation/``...). Event files higher up (say, at ``runs/<group>/``)
    are a run of their own too, never dropped, but own only their own files so
    that they hide none of the runs below them.
    """
    found = set()
    if skip is not None and runs_dir.resolve().is_relative_to(skip.resolve()):
        skip = None  # the runs lie inside the report folder (a committed snapshot in docs/results/<name>/runs)
    for d in [runs_dir, *(p for p in runs_dir.rglob("*") if p.is_dir())]:
        rel = d.relative_to(runs_dir).parts
        if any(part.startswith(".") or part == "checkpoints" for part in rel):
            continue
        if skip is not None and d.is_relative_to(skip):
            continue
        if next(d.glob(EVENTS), None) is not None or (d / "metrics.json").is_file() or SEED_DIR.match(d.name):
            found.add(d.parent if d.name.startswith("version_") and d != runs_dir else d)
    owners = {d for d in found if SEED_DIR.match(d.name)}
    kept = sorted(d for d in found if not any(d != o and d.is_relative_to(o) for o in owners))
    return [(d, not any(o != d and o.is_relative_to(d) for o in kept)) for d in kept]


def identify(path: Path, runs_dir: Path, cfg: dict | None) -> tuple[str, str, str, int | None]:
    """(task, model, label, seed) from the folder names and the saved config."""
    parts = list(path.relative_to(runs_dir).parts) or [path.name]
    seed, suffix = None, ""
    m = SEED_DIR.match(parts[-1])
    if m:
        seed, suffix = int(m.group(1)), m.group(2)
        parts = parts[:-1] or [path.parent.name]
    run = (cfg or {}).get("run") or {}
    task = str(run.get("group") or (parts[0] if len(parts) >= 2 else runs_dir.name))
    if len(parts) >= 2 and parts[0] == task:
        parts = parts[1:]
    model = str(run.get("model") or "")
    if len(parts) >= 2:
        model = model or parts[0]
        parts = parts[1:] if parts[0] == model else parts
    if not model and isinstance((cfg or {}).get("model"), dict):  # no name: describe it, so sizes never mix
        m = cfg["model"]
        model = " ".join(f"{k}{m[k]}" for k in ("dim", "depth", "num_heads", "patch_size") if k in m)
    return task, model, "/".join(parts) + suffix, seed


def make_run(path: Path, runs_dir: Path, recursive: bool = True) -> Run:
    """The run in folder ``path``, named relative to ``runs_dir`` (not read yet: see :func:`load_run`)."""
    hparams = read_hparams(path, recursive)
    cfg = hparams.get("cfg") if isinstance(hparams.get("cfg"), dict) else None
    task, model, label, seed = identify(path, runs_dir, cfg)
    protocol = Protocol.of_config(cfg)
    budget = protocol.budget() if protocol is not None else ""
    return Run(task, label, seed, path, model, budget, protocol, hparams=hparams, recursive=recursive)


def find_runs(runs_dir: Path, skip: Path | None = None) -> list[Run]:
    return [make_run(path, runs_dir, recursive) for path, recursive in run_folders(runs_dir, skip)]


def own_files(run_dir: Path, pattern: str, recursive: bool) -> list[Path]:
    """Files of a run: anywhere below it, or (not recursive) in it and its ``version_*`` folders."""
    if recursive:
        return sorted(run_dir.rglob(pattern))
    return sorted([*run_dir.glob(pattern), *run_dir.glob(f"version_*/{pattern}")])


def runs_of_jobs(jobs: list[Job], known: list[Run]) -> list[Run]:
    """The run folders of sweep jobs that are not among ``known`` (a multirun folder given as RUNS_DIR)."""
    seen = {r.path.resolve() for r in known}
    extra = []
    for job in jobs:
        if job.run is not None and job.run.resolve() not in seen:
            seen.add(job.run.resolve())
            root = job.run.parents[3] if len(job.run.parents) > 3 else job.run.parent  # runs/<group>/<model>/<label>
            extra.append(make_run(job.run, root))
    return extra


def find_jobs(folders: list[Path]) -> list[Job]:
    """Every Hydra job folder (``.hydra/overrides.yaml``) below ``folders``."""
    jobs = []
    seen = set()
    for folder in folders:
        for f in sorted(folder.rglob(".hydra/overrides.yaml")):
            job = f.parent.parent
            if job in seen:
                continue
            seen.add(job)
            try:
                overrides = [str(o) for o in (yaml.safe_load(f.read_text()) or [])]
            except (yaml.YAMLError, ValueError):  # not YAML, or not text
                overrides = ["(unreadable overrides.yaml)"]
            error = job_error(job)
            run, config_error = job_run_folder(job, check=error is None)
            if error is None and run is None:
                error = config_error or "no run folder and no error logged: it stopped before training started"
            jobs.append(Job(job, overrides, error, run))
    return jobs


def job_run_folder(job: Path, check: bool = True) -> tuple[Path | None, str | None]:
    """(the job's run folder if it exists, the config check's error for its saved config).

    The folder is the one the finished job wrote in ``outcome.txt`` (:func:`vitpos.run.sweep.record_outcome`):
    what the job trained in, whatever the code is today. Else it is computed from ``.hydra/config.yaml``
    as training does (:func:`vitpos.run.identity.run_dir`; a plug-in's source is read, never run). A job
    that failed before writing anything has no log, so ``check`` checks its config again to name the
    error (:func:`vitpos.validate.validate` with ``plugins=False``: a config read off disk never makes
    this process import the module it names)."""
    written = outcome_folder(job)
    if written is not None:
        return written, None
    try:
        cfg = OmegaConf.load(job / ".hydra" / "config.yaml")
    except Exception:  # noqa: BLE001  (a missing or broken config only loses the hint)
        return None, None
    error = None
    if check:
        try:
            validate(cfg.copy(), plugins=False)
        except Exception as err:  # noqa: BLE001  (any refusal is the reason to report)
            error = f"error: {err} (its config, checked again now)"
    try:
        choices = OmegaConf.load(job / ".hydra" / "hydra.yaml").hydra.runtime.choices
        OmegaConf.update(cfg, "run.model", cfg.run.get("model") or choices.get("model"), force_add=True)
        folder = run_dir(cfg)
    except Exception:  # noqa: BLE001
        return None, error
    if not folder.is_dir():  # the model part named differently: match group/*/label-hash/seed<k>
        folder = next(iter(sorted(folder.parents[2].glob(f"*/{folder.parent.name}/{folder.name}"))), folder)
    return (folder if folder.is_dir() else None), error


def outcome_folder(job: Path) -> Path | None:
    """The run folder a finished job named in its ``outcome.txt`` (``test/acc 0.5 (<folder>)``), if it is
    still there (a relative one: from this process's folder, as the sweep wrote it)."""
    try:
        text = (job / OUTCOME_FILE).read_text(errors="replace").strip()
    except OSError:
        return None
    m = re.search(r"\((.+)\)$", text)
    if m is None:
        return None
    folder = Path(m.group(1))
    return folder if folder.is_dir() else None


def job_error(job: Path) -> str | None:
    """The last error line of the job's logs (``*.log``, ``*.err``), or None."""
    error = None
    for log in sorted([*job.glob("*.log"), *job.glob("*.err")]):
        try:
            lines = log.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            text = line.strip()
            text = re.sub(r"^\[[^\]]*\]\[[^\]]*\]\[\w+\] - ", "", text)  # Hydra's log prefix
            if ERROR_LINE.match(text):
                error = text[:300]
    return error


# ------------------------------------------------------------------- reading
def read_scalars(run_dir: Path, recursive: bool = True) -> dict[str, pd.DataFrame]:
    """All scalars of all event files of the run, merged and ordered by wall time."""
    rows = []
    for f in own_files(run_dir, EVENTS, recursive):
        acc = EventAccumulator(str(f), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            rows += [(tag, e.wall_time, e.step, e.value) for e in acc.Scalars(tag)]
    df = pd.DataFrame(rows, columns=["tag", "wall_time", "step", "value"])
    df = df.sort_values(["wall_time", "step"], kind="stable")
    return {tag: g.drop(columns="tag").reset_index(drop=True) for tag, g in df.groupby("tag", sort=False)}


def read_hparams(run_dir: Path, recursive: bool = True) -> dict:
    for f in own_files(run_dir, "hparams.yaml", recursive):
        try:
            saved = yaml.safe_load(f.read_text())
        except (yaml.YAMLError, ValueError):  # not YAML, or not text: the run is reported without its config
            continue
        return saved if isinstance(saved, dict) else {}
    return {}


def find_param_count(hparams, depth: int = 0) -> float | None:
    """A number logged as ``params`` (or ``num_params``) anywhere in the hparams."""
    if not isinstance(hparams, dict) or depth > 5:
        return None
    for key in PARAM_KEYS:
        if isinstance(hparams.get(key), (int, float)):
            return float(hparams[key])
    for value in hparams.values():
        found = find_param_count(value, depth + 1)
        if found is not None:
            return found
    return None


def read_run(run: Run) -> Run:
    """``run`` with its scalars and ``metrics.json`` read (an unreadable run gets ``error``)."""
    try:
        run.scalars, run.status = read_scalars(run.path, run.recursive), read_status(run.path)
    except Exception as err:  # noqa: BLE001  (a corrupt file must not hide the other runs)
        run.error = f"could not read its event files: {err}"
    return run
