"""Typed options: every plain number and true/false option is declared once, in its schema field's metadata
(vitpos/config/), and checked by one function, which refuses ``true``/``false`` for an integer option (Python
counts them as 1 and 0, so ``data.train_len=true`` would train on sequences of one token).

Each case goes through the real check: the config composed as ``python train.py ...`` composes
it (Hydra's compose API), then :func:`vitpos.validate.validate`.
"""

import subprocess
import sys

import pytest
from conftest import CONFIGS, ROOT
from hydra import compose, initialize_config_dir

from vitpos.config import OPTIONS
from vitpos.config.rules import IMAGE, SEQUENCE, Flag, Given, Int, Number, check_options
from vitpos.errors import UserError
from vitpos.sizes import is_integer
from vitpos.validate import validate

SHAPES = ["data=shapes", "model=vit_micro"]
TASK = {IMAGE: SHAPES, SEQUENCE: ["task=sequence", "data=seq_copy"], None: SHAPES}


def refusal(*overrides: str) -> str:
    """The message ``validate`` refuses the composed config with."""
    with initialize_config_dir(config_dir=str(CONFIGS), version_base=None):
        cfg = compose("train", overrides=list(overrides))
    with pytest.raises(UserError) as err:
        validate(cfg)
    return str(err.value)


def test_a_boolean_sequence_length_is_refused():
    message = refusal("task=sequence", "data=seq_copy", "data.train_len=true")
    assert message == "data.train_len: must be an integer >= 1, got True (e.g. data.train_len=64)"


def test_a_boolean_patch_size_is_refused():
    message = refusal(*SHAPES, "model.patch_size=true")
    assert message == "model.patch_size: must be an integer >= 1, got True (e.g. model.patch_size=4)"


INTEGERS = [(option, spec) for option, spec in OPTIONS.items() if isinstance(spec, Int)]


@pytest.mark.parametrize("option,spec", INTEGERS, ids=[o for o, _ in INTEGERS])
@pytest.mark.parametrize("word", ["true", "false"])
def test_no_integer_option_takes_a_boolean(option, spec, word):
    value = f"[{word}]" if spec.items else word
    message = refusal(*TASK[spec.task], f"++{option}={value}")
    name = f"{option}[0]" if spec.items else option
    assert message.startswith(f"{name}: must be an integer >= {spec.minimum}"), message
    assert f"got {word.capitalize()}" in message and "(" in message, message  # what was wrong, and a fix


NUMBERS = [option for option, spec in OPTIONS.items() if isinstance(spec, Number)]


@pytest.mark.parametrize("option", NUMBERS)
def test_no_number_option_takes_a_boolean(option):
    spec = OPTIONS[option]
    message = refusal(*TASK[spec.task], f"++{option}={'[true]' if spec.items else 'true'}")
    name = f"{option}[0]" if spec.items else option
    assert message.startswith(f"{name}: expected a number, got True ("), message


@pytest.mark.parametrize(
    "option,value,message",
    [
        ("model.mlp_ratio", "abc", "model.mlp_ratio: expected a number, got 'abc' (e.g. model.mlp_ratio=2.0)"),
        ("seed", "abc", "seed: must be an integer >= 0 and <= 4294967295, got 'abc' (e.g. seed=0)"),
        ("optim.betas", "[0.9,x]", "optim.betas[1]: expected a number, got 'x' (e.g. optim.betas=[0.9,0.999])"),
        ("data.augment_magnitude", "31", "data.augment_magnitude: must be an integer >= 0 and <= 30, got 31"),
        ("trainer.gradient_clip_val", "-1", "trainer.gradient_clip_val: must be a finite number >= 0, got -1"),
        ("optim.betas", "[0.9]", "optim.betas: must be a list of 2, got 1: [0.9] (e.g. optim.betas=[0.9,0.999])"),
    ],
)
def test_text_in_a_number_option_is_refused_before_training(option, value, message):
    """Options the config fuzzer found unchecked (tests/test_config_fuzz.py): text there failed in training."""
    assert refusal(*SHAPES, f"{option}={value}").startswith(message)


FLAGS = [option for option, spec in OPTIONS.items() if isinstance(spec, Flag)]


@pytest.mark.parametrize("option", FLAGS)
@pytest.mark.parametrize(("word", "shown"), [("yes", "'yes'"), ("'false'", "'false'"), ("1", "1")])
def test_no_true_false_option_takes_text_or_a_number(option, word, shown):
    """``task.pictures=yes`` or a quoted ``'false'`` would be text, which Python counts as true."""
    message = refusal(*TASK[OPTIONS[option].task], f"++{option}={word}")
    assert message == f"{option}: must be true or false, got {shown} (e.g. {option}=true)"


def test_the_schema_names_options_the_configs_have():
    """A rule on a field no config composes would check nothing: every option is in a config of each task it
    is for."""
    from omegaconf import OmegaConf

    from vitpos.config.rules import ABSENT, lookup

    configs = {IMAGE: [SHAPES, ["data=cifar10"]], SEQUENCE: [TASK[SEQUENCE]]}
    with initialize_config_dir(config_dir=str(CONFIGS), version_base=None):
        plain = {
            task: [OmegaConf.to_container(compose("train", overrides=o), resolve=True) for o in overrides]
            for task, overrides in configs.items()
        }
    for option, spec in OPTIONS.items():
        if isinstance(spec, Given):  # some only by an override (trainer.fast_dev_run) or the run (model.geometry)
            continue
        for task in [spec.task] if spec.task else [IMAGE, SEQUENCE]:
            assert any(lookup(c, option) is not ABSENT for c in plain[task]), (option, task)


def test_one_function_decides_integer_and_bounds():
    assert is_integer(3) and not is_integer(True) and not is_integer(3.0) and not is_integer("3")
    spec = Int(5, minimum=0, null=True)
    assert spec.problem(0) is None and spec.problem(None) is None
    assert spec.problem(-1) == "must be an integer >= 0 (or null), got -1"
    assert Int(5).problem(None) == "must be an integer >= 1, got None"
    assert Number(0.1, below=1).problem(1) == "must be in [0, 1), got 1"
    assert Number(1, above=True).problem(float("inf")) == "must be a finite number > 0, got inf"


def test_absent_options_and_exempting_options():
    """An option the config does not have is not checked; ``trainer.fast_dev_run`` makes
    ``trainer.max_epochs`` unused, so 0 is fine there and nowhere else."""
    plain = {"optim": {"lr": 0.1}, "trainer": {"max_epochs": 0, "fast_dev_run": True}}
    check_options(plain, IMAGE, OPTIONS)
    plain["trainer"]["fast_dev_run"] = False
    with pytest.raises(UserError, match="trainer.max_epochs: must be an integer >= 1, got 0"):
        check_options(plain, IMAGE, OPTIONS)


@pytest.mark.slow
def test_a_bad_integer_is_refused_before_torch_is_imported():
    """Whether torch is loaded is a property of the process: a fresh one."""
    code = (
        "import sys\n"
        "from hydra import compose, initialize_config_dir\n"
        "from vitpos.validate import validate\n"
        f"with initialize_config_dir(config_dir={str(CONFIGS)!r}, version_base=None):\n"
        "    cfg = compose('train', overrides=['task=sequence', 'data=seq_copy', 'data.train_len=true'])\n"
        "try:\n"
        "    validate(cfg)\n"
        "except ValueError as err:\n"
        "    print(err)\n"
        "print('torch' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.stdout.splitlines() == [
        "data.train_len: must be an integer >= 1, got True (e.g. data.train_len=64)",
        "False",
    ], proc.stdout + proc.stderr
