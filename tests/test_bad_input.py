"""Bad input through the real command line (issue 10): every case runs
``python train.py ...`` or ``python -m vitpos.<tool> ...`` in a subprocess and
must exit with code 2, print one ``error:`` line naming the option or file,
print no traceback, and leave no run folder and no Hydra ``outputs/`` behind.

The checks run before torch is imported where they can (vitpos/validate.py).
Each command is a fresh child of the warm interpreter of tests/warm_python.py
(torch, Lightning and timm imported once per test process), so a case costs
a Hydra composition and the checks.
"""

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import warm_environment

ROOT = Path(__file__).resolve().parents[1]
SHAPES = ["data=shapes", "model=vit_micro"]
SEQ = ["task=sequence"]
PROGRESSIVE = ["data.train_sizes=[16,24,32]", "data.size_schedule=progressive"]

# (id, arguments, text the message must contain)
TRAIN_CASES = [
    ("encoding-name", ["encoding.name=foo"], "encoding.name"),
    ("encoding-group", ["encoding=foo"], "no encoding 'foo'"),
    ("strategy", ["encoding.strategy=bogus"], "encoding.strategy"),
    ("strategy-rope", ["encoding=rope_2d", "encoding.strategy=bogus"], "valid: extrapolate, interpolate, ntk"),
    ("option-added", ["encoding=rope_2d", "+encoding.bogus=1"], "valid options: align, base"),
    ("option-struct", ["encoding=rope_2d", "encoding.bogus=1"], "encoding.bogus"),
    ("lr-nan", ["optim.lr=nan"], "optim.lr"),
    ("lr-inf", ["optim.lr=inf"], "optim.lr"),
    ("lr-zero", ["optim.lr=0"], "optim.lr"),
    ("lr-negative", ["optim.lr=-1"], "optim.lr"),
    ("lr-text", ["optim.lr=fast"], "optim.lr"),
    ("batch-zero", ["data.batch_size=0"], "data.batch_size"),
    ("eval-batch-zero", ["data.eval_batch_size=0"], "data.eval_batch_size"),
    ("smoothing-2", ["task.label_smoothing=2"], "task.label_smoothing"),
    ("smoothing-1", ["task.label_smoothing=1"], "task.label_smoothing"),
    ("smoothing-negative", ["task.label_smoothing=-1"], "task.label_smoothing"),
    ("sincos2d-width", ["model.dim=30", "model.num_heads=3"], "divisible by 4"),
    ("trainer-typo", ["+trainer.max_epoch=1"], "did you mean trainer.max_epochs"),
    ("epochs-zero", ["trainer.max_epochs=0"], "trainer.max_epochs"),
    ("epochs-negative", ["trainer.max_epochs=-1"], "trainer.max_epochs"),
    ("rope-base-negative", ["encoding=rope_2d", "encoding.base=-5"], "encoding.base"),
    ("rope-base-zero", ["encoding=rope_2d", "encoding.base=0"], "encoding.base"),
    ("weight-decay-negative", ["optim.weight_decay=-0.1"], "optim.weight_decay"),
    ("rope-scale-zero", ["encoding=rope_2d", "encoding.scale=0"], "encoding.scale"),
    ("temperature-zero", ["encoding.temperature=0"], "encoding.temperature"),
    ("resolution-30", ["eval.resolutions=[30]"], "eval.resolutions[0]"),
    ("resolution-4096", ["eval.resolutions=[32,4096]"], "eval.resolutions"),
    ("img-size", ["data.img_size=30"], "data.img_size"),
    ("rope2d-head-dim", ["encoding=rope_2d", "model.dim=12", "model.num_heads=2"], "multiple of 4"),
    ("heads-divide", ["model.dim=65", "model.num_heads=4"], "model.dim"),
    ("label-absolute", ["run.label=/abs/path"], "run.label"),
    ("label-dotdot", ["run.label=.."], "run.label"),
    ("group-slash", ["run.group=a/b"], "run.group"),
    ("sequence-encoding-on-images", ["encoding=alibi"], "for sequences"),
    ("combo-one-part", ["encoding=combo", "encoding.parts=[rope_2d]"], "two or more distinct parts"),
    ("cpe-blocks", ["encoding=cpe", "encoding.blocks=[9]"], "encoding.blocks"),
    ("val-size", ["data.num_train=512", "data.val_size=2000"], "data.val_size"),
    ("augment-policy", ["data.augment=autoaug"], "valid: none, trivial, randaugment"),
    ("ema-decay-1", ["task.ema_decay=1"], "task.ema_decay"),
    ("eval-subset-zero", ["eval.test_subset=0"], "eval.test_subset"),
    ("train-subset-zero", ["data=cifar10", "data.train_subset=0"], "data.train_subset"),
    ("model-group", ["model=huge"], "vit_micro"),
    ("key-typo", ["data.batch_sizee=3"], "did you mean data.batch_size"),
    ("seq-image-encoding", [*SEQ, "encoding=rope_2d"], "for images"),
    ("seq-rope1d-head-dim", [*SEQ, "model.dim=12", "model.num_heads=4"], "multiple of 2"),
    ("seq-length-100000", [*SEQ, "eval.lengths=[64,100000]"], "eval.lengths"),
    ("seq-length-zero", [*SEQ, "eval.lengths=[0]"], "eval.lengths[0]"),
    ("seq-train-len", [*SEQ, "data.train_len=0"], "data.train_len"),
    ("train-sizes-patch", ["data.train_sizes=[16,18]"], "data.train_sizes[1]"),
    ("size-schedule-unknown", ["data.size_schedule=fixres"], "data.size_schedule"),
    ("size-schedule-no-sizes", ["data.size_schedule=progressive"], "data.size_schedule"),
    ("size-epochs-count", [*PROGRESSIVE, "data.size_epochs=[1,2]"], "data.size_epochs"),
    ("size-epochs-zero", [*PROGRESSIVE, "data.size_epochs=[2,0,1]"], "data.size_epochs[1]"),
    ("size-epochs-random", ["data.train_sizes=[16,32]", "data.size_epochs=[1,1]"], "size_schedule=progressive"),
    ("native-size-shapes", ["data.native_size=32"], "data.native_size"),
    ("run-model-escapes", ["run.model=../../../y"], "run.model"),
    ("threads-bad", ["threads=-3"], "threads"),
]


pytestmark = pytest.mark.usefixtures("warm_env")  # every command: a fresh child of the warm interpreter


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``args`` (``sys.executable`` first) run as ``python ...`` from the warm environment."""
    env = warm_environment(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    argv = ["python", *args[1:]] if args[0] == sys.executable else args
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def assert_user_error(proc: subprocess.CompletedProcess, needle: str) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out, out
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, out
    assert needle in errors[0], out


@pytest.mark.parametrize("args,needle", [c[1:] for c in TRAIN_CASES], ids=[c[0] for c in TRAIN_CASES])
def test_train_refuses_before_writing(tmp_path, args, needle):
    base = [] if any(a.startswith(("data=", "task=")) for a in args) else SHAPES
    proc = run([sys.executable, str(ROOT / "train.py"), *base, *args, f"run.root={tmp_path / 'runs'}"], tmp_path)
    assert_user_error(proc, needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a run folder or Hydra output was written"


def test_data_root_is_a_file(tmp_path):
    file = tmp_path / "cifar.tar"
    file.write_text("not a folder")
    args = ["data=cifar10", "data.format=imagefolder", f"data.root={file}", f"run.root={tmp_path / 'runs'}"]
    proc = run([sys.executable, str(ROOT / "train.py"), *args], tmp_path)
    assert_user_error(proc, f"data.root: {file} is a file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cifar.tar"]


def test_data_root_missing_imagefolder(tmp_path):
    args = ["data=cifar10", "data.format=imagefolder", f"data.root={tmp_path / 'nowhere'}", "run.root=runs"]
    proc = run([sys.executable, str(ROOT / "train.py"), *args], tmp_path)
    assert_user_error(proc, "data.root")
    assert "ImageFolder tree DIR/train/<class>/*.jpg" in proc.stderr
    assert "shared/" not in proc.stderr  # no path of one workplace in the library's messages
    assert list(tmp_path.iterdir()) == []


TOOL_CASES = [
    ("extrapolate-unknown-key", ["vitpos.extrapolate", "bogus=1"], "bogus"),
    ("extrapolate-no-ckpt", ["vitpos.extrapolate", "ckpt=/no/such/file.ckpt"], "/no/such/file.ckpt"),
    ("extrapolate-bare-word", ["vitpos.extrapolate", "last.ckpt"], "expected key=value"),
    ("viz-unknown-key", ["vitpos.viz", "encoding=rope_2d", "colour=red"], "colour"),
    ("viz-unknown-encoding", ["vitpos.viz", "encoding=foo"], "encoding=foo"),
    ("viz-no-ckpt", ["vitpos.viz", "ckpt=/no/such/file.ckpt"], "/no/such/file.ckpt"),
    ("compare-no-runs", ["vitpos.compare", "runs=/no/such/runs"], "/no/such/runs"),
]


@pytest.mark.parametrize("args,needle", [c[1:] for c in TOOL_CASES], ids=[c[0] for c in TOOL_CASES])
def test_tools_refuse_with_one_line(tmp_path, args, needle):
    proc = run([sys.executable, "-m", *args], tmp_path)
    assert_user_error(proc, needle)
    assert list(tmp_path.iterdir()) == []


def composed_error(args: list[str]) -> str | None:
    """The one-line message ``train.py`` would print for ``args``, found in process: Hydra's
    composition error (as ``train.py``'s precheck words it) or the config check's."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    from vitpos.cli import override_error
    from vitpos.errors import InputError
    from vitpos.validate import validate

    base = [] if any(a.startswith(("data=", "task=")) for a in args) else SHAPES
    try:
        with initialize_config_dir(str(ROOT / "configs"), version_base="1.3"):
            cfg = compose("train", overrides=[*base, *args])
    except HydraException as err:
        return str(override_error(err, ROOT / "configs", [*base, *args]))
    try:
        validate(cfg)
    except InputError as err:
        return str(err)
    return None


def test_at_least_forty_distinct_bad_inputs():
    """Each case is refused, and by a message of its own: forty inputs caught by forty
    different answers, not one check counted forty times."""
    messages = {case[0]: composed_error(case[1]) for case in TRAIN_CASES}
    accepted = sorted(name for name, message in messages.items() if message is None)
    assert not accepted, f"accepted without an error: {accepted}"
    for (name, _, needle), message in zip(TRAIN_CASES, messages.values()):
        assert needle in message, (name, message)
    assert len(set(messages.values())) >= 40


def test_unusable_data_is_one_line_and_leaves_no_run_folder(tmp_path):
    """A data error found only when the data set loads (after the config check):
    an ImageFolder tree whose class folders are empty."""
    from vitpos.data.cifar10 import CLASSES

    for split in ("train", "test"):
        for name in CLASSES:
            (tmp_path / "data" / split / name).mkdir(parents=True)
    args = ["data=cifar10", "data.format=imagefolder", f"data.root={tmp_path / 'data'}", "model=vit_micro"]
    proc = run([sys.executable, str(ROOT / "train.py"), *args, f"run.root={tmp_path / 'runs'}"], tmp_path)
    assert_user_error(proc, str(tmp_path / "data"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"], "a run folder was left behind"


# ---------------------------------------------------------------- issue 19: the holes found by probing
# `$TINY` of issue 19: a run of a few seconds on generated shapes
TINY = [
    "data=shapes",
    "model=vit_micro",
    "trainer.max_epochs=1",
    "+trainer.limit_train_batches=5",
    "+trainer.limit_val_batches=2",
    "data.num_test=64",
    "eval.resolutions=[]",
    "task.pictures=false",
    "trainer.enable_progress_bar=false",
]


def train_cmd(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "train.py"), *args]


def files_under(folder: Path) -> dict[str, int]:
    """Every file below `folder` with its modification time (folders: their names only)."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns if p.is_file() else 0 for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """(run.root, run folder) of one finished $TINY run."""
    root = tmp_path_factory.mktemp("tiny") / "runs"
    proc = run(train_cmd(*TINY, f"run.root={root}"), root.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (status,) = root.rglob("metrics.json")
    return root, status.parent


def test_run_model_cannot_leave_run_root(tmp_path):
    proc = run(train_cmd(*TINY, f"run.root={tmp_path / 'R'}", "run.model=../../../y"), tmp_path)
    assert_user_error(proc, "run.model")
    assert list(tmp_path.iterdir()) == []


def test_every_run_folder_component_goes_through_one_check():
    from vitpos.errors import UserError
    from vitpos.validate import RUN_FOLDER_KEYS, check_run_names

    assert set(RUN_FOLDER_KEYS) == {"group", "model", "label"}
    for key in RUN_FOLDER_KEYS:
        for bad in ("../x", "/abs", "..", "a/b", "~home"):
            with pytest.raises(UserError, match=f"run.{key}"):
                check_run_names({"group": "g", "model": "m", "label": None, key: bad})


@pytest.mark.slow
def test_resume_false_on_an_existing_run(tiny_run):
    root, folder = tiny_run
    before = files_under(folder)
    proc = run(train_cmd(*TINY, f"run.root={root}", "resume=false"), root.parent)
    assert_user_error(proc, "resume: resume=false but")
    assert files_under(folder) == before  # nothing written, not even an event file


@pytest.mark.slow
def test_resume_true_without_last_ckpt(tmp_path):
    proc = run(train_cmd(*TINY, f"run.root={tmp_path / 'R'}", "resume=true"), tmp_path)
    assert_user_error(proc, "resume: resume=true but")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_resume_auto_with_another_configurations_last_ckpt(tiny_run, tmp_path):
    import shutil

    root, folder = tiny_run
    other = [*TINY, "optim.lr=0.001", f"run.root={tmp_path / 'R'}"]
    from hydra import compose, initialize_config_dir

    from vitpos.run.identity import run_dir

    with initialize_config_dir(str(ROOT / "configs"), version_base="1.3"):
        cfg = compose("train", overrides=[*other, "run.model=vit_micro"])
    target = run_dir(cfg) / "checkpoints"
    target.mkdir(parents=True)
    shutil.copy(folder / "checkpoints" / "last.ckpt", target / "last.ckpt")
    before = files_under(tmp_path)
    proc = run(train_cmd(*other), tmp_path)
    assert_user_error(proc, "resume: ")
    assert "another configuration" in proc.stderr and "optim.lr" in proc.stderr
    assert files_under(tmp_path) == before


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["missing", "truncated", "crafted", "not-a-checkpoint", "other-task"])
def test_resume_path_is_checked_before_training(tiny_run, tmp_path, kind):
    import torch
    from ckpt_factory import make_evil_checkpoint

    _, folder = tiny_run
    last = folder / "checkpoints" / "last.ckpt"
    path = tmp_path / f"{kind}.ckpt"
    if kind == "truncated":
        path.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
    elif kind == "crafted":
        path = make_evil_checkpoint(tmp_path / "evil", tmp_path / "pwned")
    elif kind == "not-a-checkpoint":
        path.write_text("notes, not weights\n")
    elif kind == "other-task":
        saved = torch.load(last, map_location="cpu", weights_only=True)
        saved["hyper_parameters"]["cfg"]["task"]["name"] = "sequence"
        torch.save(saved, path)
    before = files_under(tmp_path)
    proc = run(train_cmd(*TINY, f"run.root={tmp_path / 'R'}", f"resume={path}"), tmp_path)
    assert_user_error(proc, "resume: ")
    assert str(path) in proc.stderr or kind == "other-task", proc.stderr
    assert files_under(tmp_path) == before  # no run folder, no event file
    assert not (tmp_path / "pwned").exists()


def small_imagefolder(root: Path, per_class: int) -> Path:
    """An ImageFolder CIFAR-10 tree with ``per_class`` 32x32 PNGs per class and split."""
    import torch
    from torchvision.io import write_png

    from vitpos.data.cifar10 import CLASSES

    gen = torch.Generator().manual_seed(0)
    for split in ("train", "test"):
        for name in CLASSES:
            (root / split / name).mkdir(parents=True)
            for i in range(per_class):
                write_png(
                    torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8, generator=gen),
                    str(root / split / name / f"{i}.png"),
                )
    return root


@pytest.mark.parametrize(
    "args,needle",
    [
        ([], "data.val_size: 5000 leaves no training images"),
        (["data.val_size=10", "data.train_subset=1000"], "data.train_subset: 1000 is more than the 20 training"),
        (["data.val_size=10", "data.test_subset=1000"], "data.test_subset: 1000 is more than the 30 test"),
        (["data.val_size=10", "eval.test_subset=31"], "eval.test_subset: 31 is more than the 30 test"),
    ],
    ids=["val-size", "train-subset", "test-subset", "eval-test-subset"],
)
def test_sizes_the_data_cannot_give(tmp_path, args, needle):
    data = small_imagefolder(tmp_path / "data", per_class=3)
    proc = run(train_cmd("data.format=imagefolder", f"data.root={data}", *args, f"run.root={tmp_path / 'R'}"), tmp_path)
    assert_user_error(proc, needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


@pytest.mark.parametrize("tool", ["vitpos.viz", "vitpos.extrapolate"])
def test_tools_on_a_file_that_is_not_a_checkpoint(tmp_path, tool):
    (tmp_path / "notes.txt").write_text("my notes\n")
    proc = run([sys.executable, "-m", tool, "ckpt=notes.txt"], tmp_path)
    assert_user_error(proc, "notes.txt: not a checkpoint")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
