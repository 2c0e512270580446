"""The typed schema (vitpos/config): each group option's YAML file starts from its dataclass, so a key the schema
lacks is refused wherever it is written, a YAML file or the command line, naming the same option; the composed
config holds the schema's keys and nothing else."""

import dataclasses

import pytest
from conftest import CONFIGS, compose_train, run_command
from omegaconf import OmegaConf

from vitpos import CONFIG_DIR, config


@pytest.mark.parametrize(("group", "option"), sorted(config.SCHEMAS))
def test_each_schema_is_what_its_config_file_composes(group, option):
    """The YAML file sets nothing the schema does not define (``defaults`` start from it), and composing the
    option gives exactly the schema's keys, in its order, at its defaults."""
    text = OmegaConf.load(CONFIG_DIR / group / f"{option}.yaml")
    assert f"/schema/{group}/{option}@_here_" in OmegaConf.to_container(text)["defaults"]
    composed = OmegaConf.to_container(compose_train(f"{group}={option}")[group])
    assert list(composed) == [f.name for f in dataclasses.fields(config.SCHEMAS[(group, option)])]
    assert composed == config.defaults(config.SCHEMAS[(group, option)])


def test_the_repository_configs_are_the_package_configs():
    """The repository's configs/ is the package's (a link), so the paths the docs name are what the wheel ships."""
    assert CONFIGS.resolve() == CONFIG_DIR.resolve()


def test_a_typo_in_a_yaml_file_and_on_the_command_line_are_refused_alike(tmp_path):
    """A misspelt ``hfilp`` in a user's own data config (``--config-dir``) and on the command line: exit 2, one
    line, the same option named; the file's refusal names the file and lists the valid keys, and offers no ``+``
    (the key is not on the command line to change)."""
    (tmp_path / "data").mkdir()
    own = "defaults:\n  - /schema/data/shapes@_here_\n  - _self_\nhfilp: true\n"
    (tmp_path / "data" / "myshapes.yaml").write_text(own)
    in_file = run_command("train.py", "--config-dir", str(tmp_path), "data=myshapes", "run.root=runs", cwd=tmp_path)
    on_line = run_command("train.py", "data=shapes", "data.hfilp=true", "run.root=runs", cwd=tmp_path)
    for ran in (in_file, on_line):
        assert ran.code == 2, ran.err
        (line,) = ran.err.strip().splitlines()
        assert line.startswith("error: data.hfilp: no such option")
    assert "data/myshapes.yaml" in in_file.err and "data.hflip" in in_file.err and "+data" not in in_file.err
    assert "did you mean data.hflip?" in on_line.err
    assert not (tmp_path / "runs").exists()


def test_a_users_own_config_folder_trains_through_the_schema(tmp_path):
    """``--config-dir`` adds the user's own group options: one that sets a known key composes, and its value
    reaches the config the run would train (the check passes: nothing but the typo above is refused)."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "small.yaml").write_text(
        "defaults:\n  - /schema/data/shapes@_here_\n  - _self_\nval_size: 64\n"
    )
    ran = run_command("train.py", "--config-dir", str(tmp_path), "data=small", "--cfg", "job", cwd=tmp_path)
    assert ran.code == 0, ran.err
    assert "val_size: 64" in ran.out and "num_train: 20000" in ran.out


def test_a_key_a_data_set_gained_at_null_keeps_its_folder():
    """shapes gained ``train_subset`` and ``test_subset`` at null (configs/debug/subset.yaml sets them): a shapes
    run sits in the folder its config named without them, a value moves it; cifar10's file always held them,
    so there a null still counts, as it always did."""
    from vitpos.run.identity import identity, run_dir

    cfg = compose_train("data=shapes", "model=vit_micro")
    assert cfg.data.train_subset is None and cfg.data.test_subset is None
    older = OmegaConf.to_container(cfg)
    del older["data"]["train_subset"], older["data"]["test_subset"]
    assert run_dir(OmegaConf.create(older)) == run_dir(cfg)
    assert run_dir(compose_train("data=shapes", "model=vit_micro", "data.train_subset=500")) != run_dir(cfg)
    assert run_dir(compose_train("data=shapes", "model=vit_micro", "debug=subset")).parts[-4] == "debug"
    cifar = identity({**OmegaConf.to_container(compose_train("data=cifar10")), "run": {"data_fingerprint": "x"}})
    assert cifar["data"]["train_subset"] is None and cifar["data"]["test_subset"] is None


def test_the_sequence_schema_is_the_data_modules_signature():
    """The sequence data sets' schema has the sequence data module's arguments, at its defaults: the module is
    built from the composed section as it stands."""
    import inspect

    from vitpos.config.data import SequenceData
    from vitpos.data.sequence import SequenceDataModule

    parameters = inspect.signature(SequenceDataModule).parameters
    fields = config.defaults(SequenceData)
    assert set(fields) == set(parameters)
    assert all(parameters[k].default == v for k, v in fields.items() if k != "name")


@pytest.mark.parametrize(
    ("words", "line"),
    [
        (["encoding=rope_2d_golden", "+encoding.min_freq=-1"],
         "error: encoding.min_freq: must be a finite number > 0, got -1 (e.g. encoding.min_freq=1.0)"),
        (["encoding=rope_2d_golden", "+encoding.zero_fraction=x"],
         "error: encoding.zero_fraction: must be a number in [0, 1), got 'x' (e.g. 0.0)"),
    ],
)  # fmt: skip
def test_an_encoding_option_is_named_once_and_blamed_for_its_own_value(words, line, tmp_path):
    """The option is named once (not ``encoding.encoding.min_freq``), the fix is its own (no config file that
    does not exist), and a value of the wrong type is blamed on the option, not on the model's width."""
    ran = run_command("train.py", *words, "run.root=runs", cwd=tmp_path)
    assert ran.code == 2
    assert ran.err.strip() == line


@pytest.mark.parametrize("launcher", ["submitit_local", "vitpos_local"])
def test_a_key_the_launchers_typed_config_lacks_is_refused_before_the_sweep(launcher, tmp_path):
    """``+hydra.launcher.nosuch=1`` is checked against the launcher plugin's own dataclass: one line, exit 2,
    and nothing written (no multirun.yaml, no .submitit folder), where submitit raised a NameError mid-sweep."""
    ran = run_command(
        "train.py", "-m", f"hydra/launcher={launcher}", "+hydra.launcher.nosuch=1", "data=shapes", cwd=tmp_path
    )
    assert ran.code == 2
    (line,) = ran.err.strip().splitlines()
    assert line.startswith("error: hydra.launcher.nosuch: not an option of ") and "timeout_min" in line
    assert list(tmp_path.iterdir()) == []


def test_the_encoding_names_read_from_the_source_are_the_registry():
    """Reading the names without importing the package gives what importing it registers."""
    from vitpos.config.encodings import builtin_names
    from vitpos.encodings import list_encodings

    assert builtin_names() == sorted(list_encodings())


def test_a_registered_encoding_without_a_config_file_composes_and_is_checked(tmp_path):
    """With its YAML file gone, ``encoding=<name>`` composes from the node the package stores, the check
    builds the encoding with its own defaults, and a new module in a folder is found by its ``@register``."""
    import shutil

    from hydra import compose, initialize_config_dir
    from hydra.core.config_store import ConfigStore

    from vitpos.config.encodings import builtin_names, files_missing
    from vitpos.validate import validate

    configs = tmp_path / "configs"
    shutil.copytree(CONFIG_DIR, configs)
    (configs / "encoding" / "rope_2d_golden.yaml").unlink()
    assert files_missing(configs) == ["rope_2d_golden"]
    ConfigStore.instance().store(group="encoding", name="rope_2d_golden", node={"name": "rope_2d_golden"})
    try:
        with initialize_config_dir(str(configs), version_base="1.3"):
            cfg = compose("train", overrides=["encoding=rope_2d_golden", "data=shapes", "model=vit_micro"])
        assert OmegaConf.to_container(cfg.encoding) == {"name": "rope_2d_golden"}
        validate(cfg)
    finally:
        ConfigStore.instance().repo["encoding"].pop("rope_2d_golden.yaml", None)
    module = tmp_path / "mine"
    module.mkdir()
    (module / "enc.py").write_text('@register\nclass Mine:\n    """One."""\n\n    name = "mine_2d"\n')
    assert builtin_names(module) == ["mine_2d"]
