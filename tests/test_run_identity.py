"""A run folder's name survives a new config key, an alias and a move.

The hash (:func:`vitpos.run.identity.identity`) covers the keys of :mod:`vitpos.run.hashed_keys`
as they are; a key added later counts only where it changes what runs (not null, not at the value
:data:`vitpos.config.OPTIONS` (the schema's field metadata) declares as before, an encoding option not at its
``__init__`` default). The saved config records what the hash found on the machine (the data's
fingerprint, the resolved precision), so a run names its folder without the data.
"""

from __future__ import annotations

import dataclasses
import shutil
from typing import Any

import pytest
import yaml
from conftest import ROOT, compose_train
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf, open_dict
from test_snapshot import SNAPSHOT_RUNS

from vitpos import config
from vitpos.cli.train_help import SAME_FOLDER, option_lines
from vitpos.config import OPTIONS
from vitpos.config.rules import Given, option, rules
from vitpos.encodings import get_encoding_class
from vitpos.run import identity as ident
from vitpos.run.hashed_keys import ENCODING_KEYS, SECTION_KEYS
from vitpos.run.identity import record, run_dir

SHAPES = ("data=shapes", "model=vit_micro")


def test_a_key_added_at_its_as_before_value_keeps_every_folder(monkeypatch):
    """The data schema with one more option, at the value that reproduces the earlier behaviour: a fresh
    run and every committed snapshot run keep their folders; set to anything else, the option moves the run
    to a new folder."""
    runs = [SHAPES, ("experiment=compare_cifar_full", "encoding=rope_2d", "seed=2")]
    before = [run_dir(compose_train(*overrides)) for overrides in runs]
    store = ConfigStore.instance()
    try:
        for data_set in ("cifar10", "shapes"):  # a new augmentation, off as before, and a note
            schema = config.SCHEMAS[("data", data_set)]
            jitter = option(0.0, rule=Given("a number", as_before=(0.0,)))
            grown = dataclasses.make_dataclass(
                schema.__name__, [("jitter", Any, jitter), ("note", Any, None)], bases=(schema,)
            )
            store.store(group="schema/data", name=data_set, node=grown)
        for name, rule in rules([("data", grown)]).items():  # the table as the grown schema derives it
            monkeypatch.setitem(OPTIONS, name, rule)
        assert [run_dir(compose_train(*overrides)) for overrides in runs] == before
        assert compose_train(*SHAPES).data.jitter == 0.0
        assert run_dir(compose_train(*SHAPES, "data.jitter=0.1")) != before[0]
        assert run_dir(compose_train(*SHAPES, "data.note=x")) != before[0]
    finally:
        config.register()  # the schemas as the package has them
    for hparams in SNAPSHOT_RUNS:
        cfg = OmegaConf.create(yaml.safe_load(hparams.read_text())["cfg"])
        with open_dict(cfg):
            cfg.data.jitter, cfg.data.note = 0.0, None
        assert run_dir(cfg).parts[-3:] == hparams.parent.parts[-3:], hparams


def schema_rule(key: str):
    """The rule in the metadata of the shapes data set's field ``key`` (one object, shared by every data set)."""
    (found,) = [f.metadata["rule"] for f in dataclasses.fields(config.SCHEMAS[("data", "shapes")]) if f.name == key]
    return found


def test_the_schema_alone_says_whether_an_option_defines_the_run(monkeypatch):
    """One owner: an option marked in the schema as not defining the run keeps the folder when it
    changes, and ``--help`` says so, with no other edit; marked back, it moves the run again."""
    base = run_dir(compose_train(*SHAPES))
    assert run_dir(compose_train(*SHAPES, "data.batch_size=32")) != base
    assert run_dir(compose_train(*SHAPES, "data.eval_batch_size=32")) == base  # the schema says: speed only
    monkeypatch.setattr(schema_rule("batch_size"), "defines", False)  # the rule every data set's field holds
    unhashed = run_dir(compose_train(*SHAPES))  # a key less in every hash: every folder moves once
    assert unhashed != base and run_dir(compose_train(*SHAPES, "data.batch_size=32")) == unhashed
    said = next(line for line in option_lines() if line.split()[0].startswith("data.batch_size"))
    assert said.split()[0] == f"data.batch_size{SAME_FOLDER}", said
    monkeypatch.setattr(schema_rule("eval_batch_size"), "defines", True)
    assert run_dir(compose_train(*SHAPES, "data.eval_batch_size=32")) != run_dir(compose_train(*SHAPES))


def test_an_encoding_option_added_at_its_default_keeps_the_folder():
    """``layout`` is an option of rope_2d that its config file never held (the schema read from the class
    now adds it at its default): at the class's default it names the same run, at another value another run."""
    assert "layout" not in ENCODING_KEYS["rope_2d"]
    default = get_encoding_class("rope_2d").option_default("layout")
    other = next(v for v in ("mixed", "half", "interleaved", "split") if v != default)
    plain = run_dir(compose_train(*SHAPES, "encoding=rope_2d"))
    assert compose_train(*SHAPES, "encoding=rope_2d").encoding.layout == default
    assert run_dir(compose_train(*SHAPES, "encoding=rope_2d", f"encoding.layout={default}")) == plain
    assert run_dir(compose_train(*SHAPES, "encoding=rope_2d", f"encoding.layout={other}")) != plain


@pytest.mark.parametrize("encoding", ["rope_2d", "string_cayley"])
def test_an_alias_and_its_strategy_share_one_folder(encoding):
    linear = run_dir(compose_train(*SHAPES, f"encoding={encoding}", "encoding.strategy=linear"))
    assert linear == run_dir(compose_train(*SHAPES, f"encoding={encoding}", "encoding.strategy=interpolate"))
    assert linear.parent.name.startswith(f"{encoding}@interpolate-")
    assert linear != run_dir(compose_train(*SHAPES, f"encoding={encoding}", "encoding.strategy=ntk"))


def composed_configs():
    """Every config a user reaches by one choice: each encoding, data set, model and experiment."""
    groups = {g: sorted(p.stem for p in (ROOT / "configs" / g).glob("*.yaml")) for g in ("encoding", "experiment")}
    yield compose_train()
    for name in groups["encoding"]:
        yield compose_train(f"encoding={name}")
    for name in groups["experiment"]:
        yield compose_train(f"experiment={name}")
    yield compose_train("data=seq_copy", "task=sequence", "model=seq_small", "encoding=rope_1d")


def test_every_key_a_config_holds_is_one_the_hash_knows_or_null():
    """The rule that keeps folders is only as good as this: a key the hash has never covered must
    enter the configs at null (or at a value the schema declares as before, or not define the run), else it
    would silently be left out of the identity while it changes what runs."""
    unknown = set()
    for cfg in composed_configs():
        plain = OmegaConf.to_container(cfg, resolve=True)
        for section in ident.RUN_DEFINING:
            values = plain.get(section) or {}
            known = (
                {"name", *ENCODING_KEYS.get(values.get("name"), ())} if section == "encoding" else SECTION_KEYS[section]
            )
            for key, value in values.items():
                spec = OPTIONS.get(f"{section}.{key}")
                declared = key in known or (spec is not None and (not spec.defines or spec.as_before))
                if (
                    not declared
                    and value is not None
                    and (section != "encoding" or ident.new_key_matters(values, key, value))
                ):
                    unknown.add(f"{section}.{key}={value!r}")
    assert not unknown, (
        f"{sorted(unknown)}: new keys at a non-null default; give each the value that keeps the earlier behaviour "
        "as its rule's as_before in its schema field (vitpos/config/), or mark it defines=False there"
    )


def test_a_run_records_what_names_it_without_the_data_or_the_machine(tmp_path):
    from test_bad_input import small_imagefolder

    data = small_imagefolder(tmp_path / "data", per_class=2)
    cfg = compose_train("data.format=imagefolder", f"data.root={data}", "run.model=vit_cpu")
    folder = run_dir(cfg)
    record(cfg)
    assert len(cfg.run.data_fingerprint) == 12 and cfg.run.precision in ("bf16-mixed", "32-true")
    assert cfg.run.machine.startswith(("cpu-", "cuda-"))
    shutil.rmtree(data)  # the saved config names the run without the data
    assert run_dir(cfg) == folder
    with open_dict(cfg):
        cfg.run.precision = "32-true" if cfg.run.precision == "bf16-mixed" else "bf16-mixed"
    assert run_dir(cfg) != folder  # and the precision it recorded, not this machine's


def test_generated_data_records_no_fingerprint():
    cfg = compose_train(*SHAPES)
    record(cfg)
    assert cfg.run.data_fingerprint is None and cfg.run.precision


@pytest.mark.parametrize("precision", ["auto", "32", "bf16-mixed", "32-true"])
def test_recording_never_moves_a_run(precision):
    """The folder computed before and after :func:`record` is the same (``trainer.precision=32`` is
    an int to Hydra and stays one in the record, as the hash has always seen it)."""
    cfg = compose_train(*SHAPES, f"trainer.precision={precision}")
    before = run_dir(cfg)
    record(cfg)
    assert run_dir(cfg) == before
