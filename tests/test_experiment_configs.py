"""Every job of every sweep in ``configs/experiment/`` passes the config check that ``train.py``
runs before anything trains (``vitpos.validate``): a sweep that a README or docs page names must
not stop at its fifth job on a width the encoding cannot split or a schedule that does not add up.
The README replay trains two jobs of some of these sweeps; this composes all of them, in process
(no training).
"""

from __future__ import annotations

import pytest
from conftest import ROOT, require_cifar
from hydra import compose, initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser

from vitpos.validate import validate

CONFIGS = ROOT / "configs"
EXPERIMENTS = sorted(p.stem for p in (CONFIGS / "experiment").glob("*.yaml"))
# the sweeps whose jobs all compose here: a new experiment is checked without being listed
SWEPT = ("encoding", "ablation")
SEED_ONLY = ("seed",)  # a seed changes no option the check looks at: the first one stands for all


def sweep_params(experiment: str) -> dict[str, str]:
    """``hydra.sweeper.params`` of ``python train.py -m experiment=NAME``, as the sweeper gets it."""
    with initialize_config_dir(str(CONFIGS), version_base="1.3"):
        cfg = compose("train", overrides=[f"experiment={experiment}"], return_hydra_config=True)
    return {key: str(value) for key, value in (cfg.hydra.sweeper.params or {}).items()}


def expand(params: dict[str, str]) -> list[list[str]]:
    """The overrides of each job, in launch order, as Hydra's BasicSweeper expands ``params``
    (the cartesian product of the sweeps, the first key the outer loop)."""
    overrides = OverridesParser.create().parse_overrides([f"{key}={value}" for key, value in params.items()])
    return [list(job) for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]


def sweep_jobs(experiment: str) -> list[list[str]]:
    """The overrides of each job that ``python train.py -m experiment=NAME`` launches, with the
    first seed only."""
    params = sweep_params(experiment)
    unknown = set(params) - set(SWEPT) - set(SEED_ONLY)
    assert not unknown, f"{experiment}: sweeps {sorted(unknown)}; add them to SWEPT so their jobs are checked"
    jobs = expand(params)

    def seed(job: list[str]) -> list[str]:
        return [arg for arg in job if arg.split("=")[0] in SEED_ONLY]

    return [job for job in jobs if seed(job) == seed(jobs[0])]


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_job_of_every_sweep_passes_the_config_check(experiment):
    jobs = sweep_jobs(experiment)
    assert jobs, f"{experiment} sweeps nothing"
    with initialize_config_dir(str(CONFIGS), version_base="1.3"):
        image = compose("train", overrides=[f"experiment={experiment}"]).data.get("format") == "imagefolder"
        where = [f"data.root={require_cifar()}"] if image else []
        for job in jobs:
            cfg = compose("train", overrides=[f"experiment={experiment}", *job, *where])
            validate(cfg)  # raises UserError naming the option for the first problem
