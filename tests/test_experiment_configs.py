"""Every job of every sweep in ``configs/experiment/`` passes the config check that ``train.py``
runs before anything trains (``vitpos.validate``): a sweep that a README or docs page names must
not stop at its fifth job on a width the encoding cannot split or a schedule that does not add up.
The README replay trains two jobs of some of these sweeps; this composes all of them, in process
(no training).
"""

from __future__ import annotations

import itertools

import pytest
from conftest import ROOT, require_cifar
from hydra import compose, initialize_config_dir

from vitpos.validate import validate

CONFIGS = ROOT / "configs"
EXPERIMENTS = sorted(p.stem for p in (CONFIGS / "experiment").glob("*.yaml"))
# the sweeps whose jobs all compose here: a new experiment is checked without being listed
SWEPT = ("encoding", "ablation")
SEED_ONLY = ("seed",)  # a seed changes no option the check looks at: the first one stands for all


def sweep_jobs(experiment: str) -> list[list[str]]:
    """The overrides of each job that ``python train.py -m experiment=NAME`` launches (its
    ``hydra.sweeper.params``, the cartesian product of the comma-separated values), with the
    first seed only."""
    with initialize_config_dir(str(CONFIGS), version_base="1.3"):
        cfg = compose("train", overrides=[f"experiment={experiment}"], return_hydra_config=True)
    params = dict(cfg.hydra.sweeper.params or {})
    unknown = set(params) - set(SWEPT) - set(SEED_ONLY)
    assert not unknown, f"{experiment}: sweeps {sorted(unknown)}; add them to SWEPT so their jobs are checked"
    axes = [[f"{key}={value}" for value in str(params[key]).split(",")] for key in SWEPT if key in params]
    axes += [[f"{key}={str(params[key]).split(',')[0]}"] for key in SEED_ONLY if key in params]
    return [list(job) for job in itertools.product(*axes)]


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


def test_the_comparison_sweeps_the_same_image_encodings_as_the_extrapolation_report():
    """issue 21: `experiment=compare_cifar_full` runs every image encoding, the two of issue 20
    included; issue 20's report (`experiment=extrapolation_native`) lists them too."""

    def encodings(experiment: str) -> list[str]:
        return sorted(
            {
                arg.removeprefix("encoding=")
                for job in sweep_jobs(experiment)
                for arg in job
                if arg.startswith("encoding=")
            }
        )

    assert encodings("compare_cifar_full") == encodings("extrapolation_native")
    assert {"alibi_2d", "lookhere", "none"} <= set(encodings("compare_cifar_full"))
