"""Bad input through the real command line (issue 10): every case runs
``python train.py ...`` or ``python -m vitpos.<tool> ...`` in a subprocess and
must exit with code 2, print one ``error:`` line naming the option or file,
print no traceback, and leave no run folder and no Hydra ``outputs/`` behind.

The checks run before torch is imported where they can (vitpos/validate.py),
so most cases cost a Python start and a Hydra composition; the encoding cases
also import torch.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHAPES = ["data=shapes", "model=vit_micro"]
SEQ = ["task=sequence"]

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
]


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


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
    assert "unpack-cifar10.sh" in proc.stderr
    assert list(tmp_path.iterdir()) == []


TOOL_CASES = [
    ("extrapolate-unknown-key", ["vitpos.extrapolate", "bogus=1"], "bogus"),
    ("extrapolate-no-ckpt", ["vitpos.extrapolate", "ckpt=/no/such/file.ckpt"], "/no/such/file.ckpt"),
    ("extrapolate-bare-word", ["vitpos.extrapolate", "last.ckpt"], "expected key=value"),
    ("viz-unknown-key", ["vitpos.viz", "encoding=rope_2d", "colour=red"], "colour"),
    ("viz-unknown-encoding", ["vitpos.viz", "encoding=foo"], "encoding=foo"),
    ("viz-no-ckpt", ["vitpos.viz", "ckpt=/no/such/file.ckpt"], "/no/such/file.ckpt"),
    ("compare-no-runs", ["vitpos.compare", "/no/such/runs"], "/no/such/runs"),
]


@pytest.mark.parametrize("args,needle", [c[1:] for c in TOOL_CASES], ids=[c[0] for c in TOOL_CASES])
def test_tools_refuse_with_one_line(tmp_path, args, needle):
    proc = run([sys.executable, "-m", *args], tmp_path)
    assert_user_error(proc, needle)
    assert list(tmp_path.iterdir()) == []


def test_at_least_forty_distinct_bad_inputs():
    cases = [tuple(c[1]) for c in TRAIN_CASES] + [tuple(c[1]) for c in TOOL_CASES]
    assert len(set(cases)) == len(cases) and len(cases) + 2 >= 40  # + the two data.root tests


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
