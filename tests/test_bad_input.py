"""Bad input through the real entry points: ``train.py``'s ``main(argv)`` and each tool's
``python -m vitpos.<tool>`` main, run in process. Each must exit with code 2, print one
``error:`` line naming the option or file, print no traceback, and leave no run folder and no
Hydra ``outputs/`` behind.

The catalogue of bad options (``TRAIN_CASES``) is checked where ``train.py`` decides it: the
command's config composed as ``train.py`` composes it, then the one config check
(vitpos/validate.py); a few of them, one per kind of check, also run the whole command. The
checks run before torch is imported where they can: two real ``python train.py`` processes
show it (the process is the point there).
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CONFIGS, ROOT, compose_train, finished_run, run_command, train_py
from hydra.errors import HydraException

from vitpos.cli.hydra_errors import override_error
from vitpos.errors import InputError
from vitpos.validate import validate

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
    # refused by the data module's constructor, which the check builds (nothing loaded)
    ("seq-offset", [*SEQ, "data.offset=20"], "data.offset: copy_offset needs 1 <= data.offset < data.min_len"),
    ("seq-data-key", [*SEQ, "+data.bogus=1"], "data.bogus: not an option of the sequence tasks (valid: anchor"),
    ("seq-task", [*SEQ, "data.task=nosuch"], "data.task: unknown sequence task 'nosuch' (valid: copy_offset"),
    ("image-data-key", ["+data.bogus=1"], "data.bogus: not an option of the image data sets (valid: augment"),
    # counted on the meta device before it is built (depth: from one block and two); vocab: 2 x 2e9 x 128 weights
    ("model-depth", [*SEQ, "model.depth=3492819962786"], "model: 692,528,399,661,510,288 parameters need"),
    ("model-memory", [*SEQ, "data.vocab_size=2000000000"], "model: 514,000,396,928 parameters need about 7659.2 GiB"),
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
    # found by the config fuzzer (tests/test_config_fuzz.py): each was a traceback
    ("task-name", ["task.name=abc"], "task.name: unknown task 'abc'"),
    ("task-name-other-task", ["task.name=sequence"], "data.task: missing, and the sequence task needs it"),
    ("model-of-other-task", ["model=seq_small"], "model.patch_size: missing, and the image task needs it"),
    ("data-of-other-task", [*SEQ, "data=shapes"], "data.task: missing, and the sequence task needs it"),
    ("option-deleted", ["~model.patch_size"], "model.patch_size: an option of its group cannot be deleted"),
    ("option-delete-missing", ["~data.nosuch"], "data.nosuch: not in the config: nothing to delete"),
    (
        "option-append-existing",
        ["+data.batch_size=3"],
        "a leading + adds a new key (drop the +: data.batch_size",
    ),
    ("option-below-missing-section", ["nosuch.x=1"], "nosuch.x: no such option"),
    ("section-deleted", ["~data"], "run.group: cannot resolve its value"),
    ("interpolation-missing", ["data.batch_size=${data.nosuch}"], "data.batch_size: cannot resolve"),
    ("interpolation-env", ["data.batch_size=${oc.env:VITPOS_NO_SUCH_VARIABLE}"], "data.batch_size: cannot resolve"),
    ("group-null", ["optim=null"], "optim: a config group cannot be set to null"),
    ("group-null-default", ["ablation=null"], "leave ablation= out for its default"),
]


def with_base(args: list[str]) -> list[str]:
    """``args`` on the small shapes setup, unless they choose the data or the task themselves."""
    return args if any(a.startswith(("data=", "task=")) for a in args) else [*SHAPES, *args]


def first_error(args: list[str]) -> str | None:
    """The message ``python train.py ARGS`` refuses with, or None: the composition's error as
    ``train.py`` words it, else the config check's."""
    train_py()  # its resolvers (${vitpos_image_encodings:}, ...)
    try:
        cfg = compose_train(*args)
    except (HydraException, ValueError) as err:  # as train.py's main: ValueError for group=null
        return str(override_error(err, CONFIGS, args))
    try:
        validate(cfg)
    except InputError as err:
        return str(err)
    return None


@pytest.mark.parametrize("args,needle", [c[1:] for c in TRAIN_CASES], ids=[c[0] for c in TRAIN_CASES])
def test_every_bad_option_is_refused_by_a_message_naming_it(args, needle):
    message = first_error(with_base(args))
    assert message is not None, "accepted without an error"
    assert needle in message, message


def assert_user_error(ran, needle: str) -> None:
    """Exit code 2, no traceback, exactly one ``error:`` line, and it holds ``needle``."""
    out = ran.out + ran.err
    assert ran.code == 2, out
    assert "Traceback" not in out, out
    errors = [line for line in ran.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, out
    assert needle in errors[0], out


# one case per kind of check: Hydra's composition (a key, a group option), the plain checks
# (numbers, threads, names, sizes, memory), Lightning's trainer keys and the encoding built
WHOLE_COMMAND = [
    "key-typo", "encoding-group", "model-group", "lr-nan", "threads-bad", "label-dotdot", "resolution-4096",
    "trainer-typo", "sequence-encoding-on-images", "rope2d-head-dim", "seq-train-len",
]  # fmt: skip


@pytest.mark.parametrize("case", WHOLE_COMMAND)
def test_train_refuses_before_writing(tmp_path, case):
    (_, args, needle) = next(c for c in TRAIN_CASES if c[0] == case)
    ran = run_command("train.py", *with_base(args), f"run.root={tmp_path / 'runs'}", cwd=tmp_path)
    assert_user_error(ran, needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a run folder or Hydra output was written"


def train_process(*args: str) -> subprocess.CompletedProcess:
    """``python -X importtime train.py ARGS``: a fresh process, which reports every module it imports."""
    cmd = [sys.executable, "-X", "importtime", str(ROOT / "train.py"), *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize(
    "args,needle",
    [
        pytest.param(["encoding=nope"], "encoding: no encoding 'nope'", id="unknown-encoding"),
        pytest.param(["data.batch_size=0"], "data.batch_size: must be", id="bad-value"),
    ],
)
def test_bad_input_is_refused_before_torch_is_imported(tmp_path, args, needle):
    proc = train_process(*args, f"run.root={tmp_path}")
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert proc.returncode == 2 and len(errors) == 1 and needle in errors[0], proc.stdout + proc.stderr[-3000:]
    imported = re.findall(r"^import time:.*\| +([\w.]+)$", proc.stderr, flags=re.M)
    assert "omegaconf" in imported, "no import report: -X importtime did not run"
    assert not [m for m in imported if m == "torch" or m.startswith("torch.")], "torch was imported"
    assert list(tmp_path.iterdir()) == []


def test_data_root_is_a_file(tmp_path):
    file = tmp_path / "cifar.tar"
    file.write_text("not a folder")
    args = ["data=cifar10", "data.format=imagefolder", f"data.root={file}", f"run.root={tmp_path / 'runs'}"]
    assert_user_error(run_command("train.py", *args, cwd=tmp_path), f"data.root: {file} is a file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cifar.tar"]


def test_data_root_missing_imagefolder(tmp_path):
    args = ["data=cifar10", "data.format=imagefolder", f"data.root={tmp_path / 'nowhere'}", "run.root=runs"]
    ran = run_command("train.py", *args, cwd=tmp_path)
    assert_user_error(ran, "data.root")
    assert "ImageFolder tree DIR/train/<class>/*.jpg" in ran.err
    assert "shared/" not in ran.err  # no path of the machine's shared folder in the library's messages
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
    assert_user_error(run_command(*args, cwd=tmp_path), needle)
    assert list(tmp_path.iterdir()) == []


def test_unusable_data_is_one_line_and_leaves_no_run_folder(tmp_path):
    """A data error found only when the data set loads (after the config check):
    an ImageFolder tree whose class folders are empty."""
    from vitpos.data.cifar10 import CLASSES

    for split in ("train", "test"):
        for name in CLASSES:
            (tmp_path / "data" / split / name).mkdir(parents=True)
    args = ["data=cifar10", "data.format=imagefolder", f"data.root={tmp_path / 'data'}", "model=vit_micro"]
    ran = run_command("train.py", *args, f"run.root={tmp_path / 'runs'}", cwd=tmp_path)
    assert_user_error(ran, str(tmp_path / "data"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"], "a run folder was left behind"


# ------------------------------------------------------------------ a finished run and its checkpoint
# a run of a few seconds on generated shapes
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


def files_under(folder: Path) -> dict[str, int]:
    """Every file below `folder` with its modification time (folders: their names only)."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns if p.is_file() else 0 for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """(run.root, run folder) of one finished $TINY run."""
    root = tmp_path_factory.mktemp("tiny") / "runs"
    return root, finished_run(root, *TINY)


def test_run_model_cannot_leave_run_root(tmp_path):
    ran = run_command("train.py", *TINY, f"run.root={tmp_path / 'R'}", "run.model=../../../y", cwd=tmp_path)
    assert_user_error(ran, "run.model")
    assert list(tmp_path.iterdir()) == []


RUN_NAMES = {"group": "GROUP", "model": "MODEL", "label": "LABEL"}


def test_every_run_folder_component_goes_through_one_check(tmp_path):
    """The run folder is <run.root>/<run.group>/<run.model>/<run.label>-<hash>/seed<k>: each of the three
    names a user sets is a folder of that path, and each refuses a value that would leave its place."""
    from vitpos.run.identity import run_dir

    cfg = compose_train(*SHAPES, f"run.root={tmp_path}", *(f"run.{k}={v}" for k, v in RUN_NAMES.items()))
    group, model, label, _ = run_dir(cfg).relative_to(tmp_path).parts
    assert (group, model, label.rsplit("-", 1)[0]) == tuple(RUN_NAMES.values())
    for key in RUN_NAMES:
        for bad in ("../x", "/abs", "..", "a/b", "~home"):
            message = first_error([*SHAPES, f"run.{key}='{bad}'"])  # quoted, as Hydra's grammar wants ~ and /
            assert message is not None and message.startswith(f"run.{key}: "), (key, bad, message)


@pytest.mark.slow
def test_resume_false_on_an_existing_run(tiny_run):
    root, folder = tiny_run
    before = files_under(folder)
    ran = run_command("train.py", *TINY, f"run.root={root}", "resume=false", cwd=root.parent)
    assert_user_error(ran, "resume: resume=false but")
    assert files_under(folder) == before  # nothing written, not even an event file


@pytest.mark.slow
def test_resume_true_without_last_ckpt(tmp_path):
    ran = run_command("train.py", *TINY, f"run.root={tmp_path / 'R'}", "resume=true", cwd=tmp_path)
    assert_user_error(ran, "resume: resume=true but")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_resume_auto_with_another_configurations_last_ckpt(tiny_run, tmp_path):
    import shutil

    from vitpos.run.identity import run_dir

    root, folder = tiny_run
    other = [*TINY, "optim.lr=0.001", f"run.root={tmp_path / 'R'}"]
    target = run_dir(compose_train(*other, "run.model=vit_micro")) / "checkpoints"
    target.mkdir(parents=True)
    shutil.copy(folder / "checkpoints" / "last.ckpt", target / "last.ckpt")
    before = files_under(tmp_path)
    ran = run_command("train.py", *other, cwd=tmp_path)
    assert_user_error(ran, "resume: ")
    assert "another configuration" in ran.err and "optim.lr" in ran.err
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
    ran = run_command("train.py", *TINY, f"run.root={tmp_path / 'R'}", f"resume={path}", cwd=tmp_path)
    assert_user_error(ran, "resume: ")
    assert str(path) in ran.err or kind == "other-task", ran.err
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
    ],
    ids=["val-size", "train-subset", "test-subset"],
)
def test_sizes_the_data_cannot_give(tmp_path, args, needle):
    data = small_imagefolder(tmp_path / "data", per_class=3)
    ran = run_command("train.py", "data.format=imagefolder", f"data.root={data}", *args, f"run.root={tmp_path / 'R'}",
                      cwd=tmp_path)  # fmt: skip
    assert_user_error(ran, needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_eval_test_subset_is_at_most_so_a_small_test_set_is_evaluated_whole(tmp_path):
    """``eval.test_subset`` (default 1000) caps the images other sizes are scored on; a test set of
    30 images passes the check (and limit_extrapolation keeps all of them) instead of being refused."""
    data = small_imagefolder(tmp_path / "data", per_class=3)
    base = ["data.format=imagefolder", f"data.root={data}", "data.val_size=10"]
    assert first_error(["model=vit_micro", *base, "eval.test_subset=31"]) is None
    assert first_error(["model=vit_micro", *base]) is None  # the default, 1000 > 30


@pytest.mark.parametrize("tool", ["vitpos.viz", "vitpos.extrapolate"])
def test_tools_on_a_file_that_is_not_a_checkpoint(tmp_path, tool):
    (tmp_path / "notes.txt").write_text("my notes\n")
    assert_user_error(run_command(tool, "ckpt=notes.txt", cwd=tmp_path), "notes.txt: not a checkpoint")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


# ------------------------------------------------------------------ a bad value: the message names the rule it breaks
@pytest.mark.parametrize(
    "args,needle",
    [
        (["data.img_size=0"], "data.img_size: 0 is not a size: give a positive side"),
        (["data.train_sizes=[0,16]"], "data.train_sizes[0]: 0 is not a size: give a positive side"),
        (["eval.resolutions=[0]"], "eval.resolutions[0]: 0 is not a size: give a positive side"),
        (["data=shapes", "data.img_size=0"], "data.img_size: 0 is not a size: give a positive side"),
        (["data.img_size=[0,16]"], "data.img_size: [0, 16] is not a size: give a positive side"),
    ],
    ids=["img-size", "train-sizes", "resolutions", "shapes-img-size", "pair"],
)
def test_a_zero_size_is_refused_as_not_positive(tmp_path, args, needle):
    """0 is a multiple of every patch size: the rule it breaks is that a size is positive (vitpos/sizes.py)."""
    ran = run_command("train.py", *args, cwd=tmp_path)  # the user's command, as typed: run.root=runs in tmp_path
    assert_user_error(ran, needle)
    assert "multiple" not in ran.err, ran.err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("base", [[], ["data=shapes"]], ids=["cifar10", "shapes"])
def test_a_negative_val_size_is_refused_by_its_own_rule(tmp_path, base):
    """-5 breaks "an integer >= 0" (vitpos/checks/options.py), not "fewer than the training images",
    whose fix (data.val_size < 20000) -5 already meets."""
    ran = run_command("train.py", *base, "data.val_size=-5", cwd=tmp_path)
    assert_user_error(ran, "data.val_size: must be an integer >= 0, got -5 (e.g. data.val_size=5000)")
    assert list(tmp_path.iterdir()) == []


def test_a_val_size_too_large_says_the_whole_range():
    from vitpos.data.options import Counts, check_split

    message = r"data.val_size: 20000 leaves no training images .*\(use 0 <= data.val_size < 20000\)"
    with pytest.raises(InputError, match=message):
        check_split({"name": "shapes", "val_size": 20000}, Counts(20000, 4000, "data.num_train", "data.num_test"))
