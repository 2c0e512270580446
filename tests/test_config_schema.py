"""The typed schema (vitpos/config): each group option's YAML file starts from its dataclass, so a key the schema
lacks is refused wherever it is written, a YAML file or the command line, naming the same option; the composed
config holds the schema's keys and nothing else."""

import dataclasses

import pytest
from conftest import CONFIGS, compose_train, run_command
from omegaconf import OmegaConf

from vitpos import CONFIG_DIR, config

#: where a group's schema goes in its file: a task's file is a recipe for the whole config (``_global_``)
PACKAGE = {"task": "task", "eval": "eval"}
#: schemas with no file of their own: the task recipe that places each
PLACED_BY = {("eval", "image"): ("task", "classification"), ("eval", "sequence"): ("task", "sequence")}


@pytest.mark.parametrize(("group", "option"), sorted(config.SCHEMAS))
def test_each_schema_is_what_its_config_file_composes(group, option):
    """The YAML file sets nothing the schema does not define (``defaults`` start from it), and composing the
    option gives exactly the schema's keys, in its order, at its defaults but for what the task's recipe sets
    (the image recipe's ``optim.lr``, each recipe's ``trainer.max_epochs``)."""
    file_group, file_option = PLACED_BY.get((group, option), (group, option))
    text = OmegaConf.load(CONFIG_DIR / file_group / f"{file_option}.yaml")
    assert f"/schema/{group}/{option}@{PACKAGE.get(group, '_here_')}" in OmegaConf.to_container(text)["defaults"]
    composed = OmegaConf.to_container(compose_train(f"{file_group}={file_option}")[group])
    assert list(composed) == [f.name for f in dataclasses.fields(config.SCHEMAS[(group, option)])]
    task = file_option if file_group == "task" else "classification"  # the recipe composed along
    recipe = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "task" / f"{task}.yaml"))
    assert composed == {**config.defaults(config.SCHEMAS[(group, option)]), **recipe.get(group, {})}


def test_each_option_has_one_rule_whatever_schema_holds_it():
    """A rule shared by several schemas (``data.batch_size`` of every data set, ``model.compile`` of every model) is
    one object, held by each of their fields (a subclass that sets another default keeps it), and the table the
    check, ``--help``, the fuzzer and the run identity read is those very objects."""
    held: dict[str, list] = {}
    for (group, _), schema in config.SCHEMAS.items():
        for f in dataclasses.fields(schema):
            held.setdefault(f"{group}.{f.name}", []).append(f.metadata.get("rule"))
    for name, found in held.items():
        assert all(rule is found[0] for rule in found), f"{name}: a field without its rule, or another rule"
        assert found[0] is None or config.OPTIONS[name] is found[0], name


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


@pytest.mark.parametrize(
    ("group", "text", "typo", "meant"),
    [
        ("optim", "defaults:\n  - /schema/optim/adamw@_here_\n  - _self_\nmin_lr_ration: 0.1\n",
         "min_lr_ration", "min_lr_ratio"),
        ("task", "# @package _global_\ndefaults:\n  - /schema/task/classification@task\n  - _self_\n"
         "task:\n  lable_smoothing: 0.2\n", "lable_smoothing", "label_smoothing"),
        ("model", "defaults:\n  - /schema/model/vit_micro@_here_\n  - _self_\nnum_head: 2\n", "num_head", "num_heads"),
        ("trainer", "defaults:\n  - /schema/trainer/default@_here_\n  - _self_\nmax_epoch: 2\n", "max_epoch",
         "max_epochs"),
        ("eval", "# @package _global_\ndefaults:\n  - /schema/task/classification@task\n  - /schema/eval/image@eval\n"
         "  - _self_\neval:\n  test_subsets: 10\n", "test_subsets", "test_subset"),
    ],
)  # fmt: skip
def test_a_typo_in_a_typed_groups_file_is_refused_as_on_the_command_line(group, text, typo, meant, tmp_path):
    """The model's, the optimiser's and the task's files (and the evaluation a task's recipe places) start
    from their schemas too: a misspelt key in a user's own file and the same key on the command line, exit 2,
    one line, the same option named; the file's refusal names the file and the valid keys, the command line's
    the closest key."""
    folder = {"eval": "task"}.get(group, group)  # eval's schema is placed by a task's recipe
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "mine.yaml").write_text(text)
    in_file = run_command("train.py", "--config-dir", str(tmp_path), f"{folder}=mine", "run.root=runs", cwd=tmp_path)
    on_line = run_command("train.py", f"{group}.{typo}=0.1", "run.root=runs", cwd=tmp_path)
    for ran in (in_file, on_line):
        assert ran.code == 2, ran.err
        (line,) = ran.err.strip().splitlines()
        assert line.startswith(f"error: {group}.{typo}: no such option")
    assert f"{folder}/mine.yaml" in in_file.err and f"{group}.{meant}" in in_file.err
    assert f"did you mean {group}.{meant}?" in on_line.err
    assert not (tmp_path / "runs").exists()


def test_the_schedule_ends_where_every_committed_run_ended():
    """``optim.min_lr_ratio`` has one default, the one every committed run trained with (0.01, not the 0.0
    the optimiser code once fell back to), and a config without the key is completed with it."""
    import yaml
    from test_snapshot import SNAPSHOT_RUNS

    from vitpos.config.optim import AdamW
    from vitpos.config.saved import complete

    ended = {yaml.safe_load(p.read_text())["cfg"]["optim"]["min_lr_ratio"] for p in SNAPSHOT_RUNS}
    assert ended == {AdamW.min_lr_ratio} == {0.01}
    assert compose_train("task=sequence").optim.min_lr_ratio == 0.01
    assert complete({"optim": {"lr": 1e-3}}, image=False)["optim"]["min_lr_ratio"] == 0.01


def test_a_saved_config_without_the_recipes_keys_builds_the_module_it_trained():
    """A checkpoint saved before the EMA and the flip test existed has neither key: its module is built
    without them (its weights hold no EMA copy), while a composed config gets today's recipe."""
    from vitpos.tasks.classification import ImageClassifier

    older = {
        "data": {"name": "cifar10", "img_size": 16, "num_classes": 10, "hflip": True},
        "model": {"patch_size": 4, "dim": 32, "depth": 1, "num_heads": 2},
        "encoding": {"name": "learned_1d"},
        "optim": {"lr": 1e-3, "weight_decay": 0.05},
        "task": {"name": "classification", "label_smoothing": 0.1},
    }
    module = ImageClassifier(older)
    assert module.ema is None and module.test_acc_flip is None and module.label_smoothing == 0.1
    assert not any(key.startswith("ema.") for key in module.state_dict())
    recipe = ImageClassifier({**older, "task": OmegaConf.to_container(compose_train().task)})
    assert recipe.ema is not None and recipe.test_acc_flip is not None


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
        (["encoding=rope_2d_golden", "encoding.min_freq=-1"],
         "error: encoding.min_freq: must be a finite number > 0, got -1 (e.g. encoding.min_freq=1.0)"),
        (["encoding=rope_2d_golden", "encoding.zero_fraction=x"],
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


@pytest.mark.parametrize("sweep", [[], ["-m"]], ids=["run", "sweep"])
def test_a_launcher_key_is_refused_with_hydras_basic_launcher_too(sweep, tmp_path):
    """Hydra's basic launcher takes no options: a single run would ignore ``+hydra.launcher.nosuch=1`` and a
    sweep would end in a traceback when Hydra builds the launcher. Both refuse it in one line, writing nothing."""
    ran = run_command("train.py", *sweep, "+hydra.launcher.nosuch=1", "data=shapes", "run.root=runs", cwd=tmp_path)
    assert ran.code == 2
    (line,) = ran.err.strip().splitlines()
    assert (
        line.startswith("error: hydra.launcher.nosuch: not an option of BasicLauncherConf") and "vitpos_local" in line
    )
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

    from vitpos.config.encodings import builtin_names, builtin_options, files_missing
    from vitpos.validate import validate

    configs = tmp_path / "configs"
    shutil.copytree(CONFIG_DIR, configs)
    (configs / "encoding" / "rope_2d_golden.yaml").unlink()
    assert set(files_missing(configs)) - set(files_missing(CONFIG_DIR)) == {"rope_2d_golden"}
    node = {"name": "rope_2d_golden", **builtin_options()["rope_2d_golden"]}  # as vitpos.config.register stores it
    ConfigStore.instance().store(group="encoding", name="rope_2d_golden", node=node)
    try:
        with initialize_config_dir(str(configs), version_base="1.3"):
            cfg = compose("train", overrides=["encoding=rope_2d_golden", "data=shapes", "model=vit_micro"])
            changed = compose("train", overrides=["encoding=rope_2d_golden", "encoding.min_freq=2", "data=shapes"])
        assert OmegaConf.to_container(cfg.encoding) == node
        assert changed.encoding.min_freq == 2  # an option of the class, set without a +
        validate(cfg)
    finally:
        ConfigStore.instance().repo["encoding"].pop("rope_2d_golden.yaml", None)
    module = tmp_path / "mine"
    module.mkdir()
    (module / "enc.py").write_text('@register\nclass Mine:\n    """One."""\n\n    name = "mine_2d"\n')
    assert builtin_names(module) == ["mine_2d"]


def test_the_options_read_from_the_source_are_the_classes_own():
    """:func:`vitpos.config.encodings.builtin_options` reads, without importing the package, what
    :meth:`PositionalEncoding.option_names` and ``option_default`` find at run time (``**kw`` followed up the
    bases): the same names and defaults for every registered encoding. The only default it cannot read is a
    computed one, and that option's config file sets it."""
    import yaml

    from vitpos.config.encodings import UNREAD, as_lists, builtin_options
    from vitpos.encodings import get_encoding_class, list_encodings

    options = builtin_options()
    assert sorted(options) == sorted(list_encodings())
    for name, read in options.items():
        cls = get_encoding_class(name)
        assert sorted(read) == sorted(set(cls.option_names()) - {o for n, o in UNREAD if n == name}), name
        assert all(as_lists(cls.option_default(k)) == v for k, v in read.items()), name
    assert UNREAD == {("liere", "init_range")}  # 2 * math.pi
    assert "init_range" in yaml.safe_load((CONFIG_DIR / "encoding" / "liere.yaml").read_text())


@pytest.mark.parametrize("name", ["rope_2d", "rope_2d_golden", "rope_2d_spiral", "cpe", "lookhere", "combo"])
def test_every_option_of_a_built_in_encoding_is_set_without_a_plus(name):
    """Each option of the class composes as ``encoding.<option>=...``; a key the class lacks is still refused."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import ConfigCompositionException

    from vitpos.encodings import get_encoding_class

    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        for option in get_encoding_class(name).option_names():
            cfg = compose("train", overrides=[f"encoding={name}", f"encoding.{option}=null"])
            assert cfg.encoding[option] is None, option
        with pytest.raises(ConfigCompositionException, match="encoding.nosuch"):
            compose("train", overrides=[f"encoding={name}", "encoding.nosuch=1"])
