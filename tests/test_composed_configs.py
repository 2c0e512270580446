"""Experiments are composed, not copied: a comparison takes its recipe whole from the lever-table
row it names (``override /ablation: <row>``) and its encodings from the one shared list
(``configs/sweep/image_encodings.yaml``, derived from the registry), so that a changed recipe is written
once and a new encoding file joins every comparison without an edit.
Composed in process with Hydra's ``compose``, as ``python train.py -m experiment=NAME`` composes each
job; the jobs are expanded by Hydra's own sweeper (test_experiment_configs.expand).
"""

from __future__ import annotations

import pytest
from conftest import ROOT
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from test_experiment_configs import EXPERIMENTS, expand, sweep_params

from vitpos.config import OPTIONS
from vitpos.encodings import PositionalEncoding, get_encoding_class, list_encodings
from vitpos.encodings import base as encoding_base
from vitpos.run.identity import RUN_DEFINING, run_label
from vitpos.run.sweep import COMPARED_FIRST, NOT_COMPARED, image_encodings

CONFIGS = ROOT / "configs"
SHARED = CONFIGS / "sweep" / "image_encodings.yaml"
# every image encoding, on every seed it lists
FULL_COMPARISONS = (
    "compare_cifar_full",
    "compare_cifar_full_e11",
    "compare_cifar_gpu",
    "extrapolation_native",
    "extrapolation_multires",
    "extrapolation_aspect",
)
# finished experiments that keep the list they ran with (each file says why)
HISTORIC = ("compare_cifar_full_13ep", "compare_cifar_quick")
# comparison -> (the lever table that has its row, the row): the experiment trains exactly that row
ROWS = {
    "compare_cifar_full": ("recipe_levers_bf16", "d96_e20"),
    "compare_cifar_full_e11": ("recipe_levers_bf16", "progressive_e11"),
}


def compose_train(*overrides: str):
    """``configs/train.yaml`` composed with ``overrides``, as ``python train.py OVERRIDES`` composes it."""
    with initialize_config_dir(str(CONFIGS), version_base="1.3"):
        return compose("train", overrides=list(overrides))


def shared_list() -> list[str]:
    return str(OmegaConf.load(SHARED).encoding).split(",")


def swept_encodings(experiment: str) -> list[str]:
    """The encodings of ``experiment``'s jobs in launch order, each once."""
    names = [
        arg.split("=", 1)[1] for job in expand(sweep_params(experiment)) for arg in job if arg.startswith("encoding=")
    ]
    return list(dict.fromkeys(names))


def recipe(cfg) -> dict:
    """What a run learns from (the sections its folder's hash covers, vitpos/run/identity.py):
    where it is filed (``run``) and what it is tested on afterwards (``eval``) left out."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    return {
        section: {k: v for k, v in plain[section].items() if getattr(OPTIONS.get(f"{section}.{k}"), "defines", True)}
        for section in RUN_DEFINING
    }


@pytest.mark.parametrize("experiment", sorted(ROWS))
def test_a_comparison_trains_the_lever_table_row_it_names(experiment):
    table, row = ROWS[experiment]
    comparison = compose_train(f"experiment={experiment}", "encoding=cpe", "seed=0")
    lever = compose_train(f"experiment={table}", f"ablation={row}", "encoding=cpe", "seed=0")
    assert row in sweep_params(table)["ablation"].split(","), f"{table} has no row {row}"
    # the recipe keys one by one (a readable failure), then everything the run learns from
    for key in (
        "model.dim", "model.depth", "model.num_heads", "model.patch_size",
        "data.batch_size", "data.train_subset", "data.test_subset", "data.img_size",
        "data.train_sizes", "data.size_schedule", "data.size_epochs", "data.augment",
        "optim.lr", "optim.weight_decay", "optim.warmup_epochs",
        "trainer.max_epochs", "trainer.check_val_every_n_epoch", "trainer.precision",
    ):  # fmt: skip
        assert OmegaConf.select(comparison, key) == OmegaConf.select(lever, key), key
    assert recipe(comparison) == recipe(lever)
    assert comparison.trainer.max_epochs == OmegaConf.load(CONFIGS / "ablation" / f"{row}.yaml").trainer.max_epochs


@pytest.mark.parametrize("experiment", sorted(ROWS))
def test_a_comparison_labels_its_runs_by_encoding_not_by_the_row(experiment):
    """The ablation file names its row (``run.label: d96_e20``); the comparison's runs are one per
    encoding, and each must keep its own folder (``cpe-<hash>``, not ``d96_e20-<hash>``)."""
    assert OmegaConf.load(CONFIGS / "ablation" / f"{ROWS[experiment][1]}.yaml").run.label == ROWS[experiment][1]
    for encoding in ("cpe", "rope_2d"):
        cfg = compose_train(f"experiment={experiment}", f"encoding={encoding}")
        assert cfg.run.label is None
        assert run_label(cfg) == encoding


def test_the_shared_list_is_every_image_encoding_once():
    """The YAML's list is derived from the registry (vitpos.run.sweep.image_encodings): every built-in
    encoding that takes a 2D grid but the named exclusions; the frozen order first, then the others
    alphabetically, so that the jobs of the earlier comparisons keep their places."""
    names = shared_list()
    assert names == image_encodings()
    assert len(set(names)) == len(names), "an encoding is listed twice"
    images = set(list_encodings(grid_dims=2))
    assert set(NOT_COMPARED) <= images, "an exclusion names no registered image encoding"
    assert set(names) == images - set(NOT_COMPARED)
    # the frozen order names only encodings that exist (a renamed one fails here, not in a sweep), then the rest
    assert names[: len(COMPARED_FIRST)] == list(COMPARED_FIRST)
    later = names[len(COMPARED_FIRST) :]
    assert later == sorted(later)
    # every encoding that works on images only is in it: a new one cannot be left out of the comparisons
    image_only = {name for name in images if get_encoding_class(name).grid_dims == (2,)}
    assert image_only <= set(names), f"not in {SHARED.name}: {sorted(image_only - set(names))}"


@pytest.mark.parametrize(("module", "joins"), [("vitpos.encodings.zz_new", True), ("my_package.my_enc", False)])
def test_a_new_image_encoding_file_joins_the_comparisons_without_an_edit(monkeypatch, module, joins):
    """A class registered by a new module of the package runs last in every full comparison; a plug-in's
    (an entry point, ``encoding.module=``) never does."""
    new = type("ZzNew", (PositionalEncoding,), {"name": "zz_new", "grid_dims": (2,), "__module__": module})
    monkeypatch.setitem(encoding_base._REGISTRY, "zz_new", new)  # as @register would, undone after the test
    assert (swept_encodings("compare_cifar_full")[-1] == "zz_new") is joins
    assert ("zz_new" in shared_list()) is joins


@pytest.mark.parametrize("experiment", FULL_COMPARISONS)
def test_every_full_comparison_sweeps_the_shared_list(experiment):
    with initialize_config_dir(str(CONFIGS), version_base="1.3"):
        cfg = compose("train", overrides=[f"experiment={experiment}"], return_hydra_config=True)
    assert cfg.hydra.runtime.choices.get("sweep") == "image_encodings", f"{experiment} writes its own list"
    # the shared list is merged after the file's own keys (so that its seed stays the outer loop): a list
    # written in the file would be silently replaced
    own = OmegaConf.load(CONFIGS / "experiment" / f"{experiment}.yaml")
    assert OmegaConf.select(own, "hydra.sweeper.params.encoding") is None, f"{experiment}: a list of its own"
    assert swept_encodings(experiment) == shared_list()
    # the seed is the outer loop: every encoding runs with the first seed before any runs with the next
    jobs = expand(sweep_params(experiment))
    seeds = [arg for job in jobs for arg in job if arg.startswith("seed=")]
    assert seeds == sorted(seeds, key=lambda arg: int(arg.split("=")[1]))
    assert len(jobs) == len(shared_list()) * len(set(seeds))


def test_a_command_line_list_still_replaces_the_shared_one():
    """``python train.py -m experiment=compare_cifar_full encoding=none,rope_2d`` (the README replay)
    runs those two: the sweeper takes the command line's value for a key its params also have."""
    params = {**sweep_params("compare_cifar_full"), "encoding": "none,rope_2d", "seed": "0"}
    assert expand(params) == [["seed=0", "encoding=none"], ["seed=0", "encoding=rope_2d"]]


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_an_image_comparison_either_sweeps_the_shared_list_or_says_why_not(experiment):
    encodings = swept_encodings(experiment)
    if compose_train(f"experiment={experiment}").task.name == "sequence":
        assert set(encodings) <= set(list_encodings(grid_dims=1))
    elif len(encodings) < 2:  # a lever table: one encoding, the levers are the rows
        assert experiment not in FULL_COMPARISONS
    elif experiment in HISTORIC:
        assert encodings != shared_list()
        assert "its own list" in (CONFIGS / "experiment" / f"{experiment}.yaml").read_text()
    else:
        assert experiment in FULL_COMPARISONS, f"{experiment}: take /sweep: image_encodings, or list it in HISTORIC"
