"""An installed vitpos works outside its repository: the wheel is built from this checkout, installed without
``-e`` into a folder of its own, and every tool runs from a folder outside the repository. ``vitpos.__file__``
must lie in the install folder, so that the editable install of the checkout cannot answer instead."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, TINY_SHAPES_RUN

pytestmark = pytest.mark.slow  # a wheel build and five Python processes of the project
#: left out of the copy the wheel is built from: folders of the checkout's top level that git does not track
#: (``data`` there is the data set; ``vitpos/data`` and ``vitpos/configs/data`` are code and configs) ...
TOP_LEVEL = (".git", "build", "data", "runs", "multirun", "outputs")
#: ... and build and cache leftovers at any depth
ANYWHERE = ("*.egg-info", "__pycache__", ".*_cache")

LIBRARY_CHECK = """
import vitpos, torch
from vitpos.data.images import ImageDataModule
from vitpos.encodings import EncodingContext, create_encoding
from vitpos.models import VisionTransformer
assert vitpos.__file__.startswith({site!r}), vitpos.__file__
rope = create_encoding("rope_2d", EncodingContext(32, 2, 2, (4, 4), 0))
q = torch.randn(1, 2, 16, 16)
assert rope.rotate_qk(q, q, (4, 4), 0)[0].shape == q.shape
data = ImageDataModule(name="shapes", num_train=64, val_size=16, num_test=16, img_size=16)
data.setup("fit")
images, labels = data.prepare_batch(next(iter(data.train_dataloader())), train=True)
model = VisionTransformer("rope_2d", img_size=16, patch_size=4, dim=32, depth=2, num_heads=2,
                          num_classes=data.num_classes)
assert model(images).shape == (len(images), len(data.classes))
import sys
elsewhere = [m.__file__ for n, m in list(sys.modules.items())
             if n.split(".")[0] == "vitpos" and getattr(m, "__file__", None) and not m.__file__.startswith({site!r})]
assert not elsewhere, elsewhere  # an editable install of the checkout must not answer for a submodule either
print("library ok", vitpos.__file__)
"""


def run(args: list[str], cwd: Path, env: dict) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    tail = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{tail}"
    return done.stdout + done.stderr


def untracked(folder: str, names: list[str]) -> set[str]:
    """What the copy leaves out of ``folder``: :data:`TOP_LEVEL` at the checkout's top, :data:`ANYWHERE` anywhere."""
    top = shutil.ignore_patterns(*TOP_LEVEL)(folder, names) if Path(folder) == ROOT else set()
    return top | shutil.ignore_patterns(*ANYWHERE)(folder, names)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path, dict]:
    """(install folder, a working folder outside the repository, the environment that finds the install first)."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheels, site, work = tmp / "wheels", tmp / "site", tmp / "work"
    work.mkdir()
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    source = tmp / "source"  # a copy without build/, data/ or runs: the wheel holds what the checkout tracks
    shutil.copytree(ROOT, source, symlinks=True, ignore=untracked)
    run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)], tmp, dict(os.environ))
    (wheel,) = wheels.glob("vitpos-*.whl")
    run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], tmp, dict(os.environ))
    env = {**os.environ, "PYTHONPATH": str(site), "OMP_NUM_THREADS": "1"}
    return site, work, env


def test_the_wheel_ships_the_configs_and_the_library_works_from_any_folder(installed):
    site, work, env = installed
    assert (site / "vitpos" / "configs" / "train.yaml").is_file()
    assert (site / "vitpos" / "configs" / "encoding" / "rope_2d.yaml").is_file()
    assert ROOT.resolve() not in work.resolve().parents and work.resolve() != ROOT.resolve()
    assert "library ok" in run([sys.executable, "-c", LIBRARY_CHECK.format(site=str(site))], work, env)


def test_the_installed_commands_train_extrapolate_and_compare_outside_the_repository(installed):
    site, work, env = installed
    tiny = [a for a in TINY_SHAPES_RUN if a != "eval.resolutions=[]"]
    script = site / "bin" / "vitpos-train"
    assert script.is_file(), "the wheel installs the vitpos-train command"
    out = run([sys.executable, str(script), *tiny, "trainer.max_epochs=1", "eval.resolutions=[32]", "run.root=runs"],
              work, env)  # fmt: skip
    assert "test/acc" in out
    (folder,) = (work / "runs").glob("shapes/vit_micro/*/seed0")
    assert (folder / "metrics.json").is_file()
    assert (
        "error: encoding"
        in subprocess.run(
            [sys.executable, "-m", "vitpos", "encoding=nosuch"], cwd=work, env=env, capture_output=True, text=True
        ).stderr
    )
    out = run([sys.executable, "-m", "vitpos.extrapolate", f"ckpt={folder}", "resolutions=[16,32]", "out=extra"],
              work, env)  # fmt: skip
    assert "16" in out and any((work / "extra").iterdir())
    run([sys.executable, "-m", "vitpos.compare", "runs=runs", "out=report"], work, env)
    assert (work / "report" / "report.md").is_file()
    for path in (site / "vitpos").rglob("*.py"):  # nothing in the package reaches for the repository's folders
        text = path.read_text()
        assert 'parents[2] / "configs"' not in text and 'ROOT / "configs"' not in text, path
