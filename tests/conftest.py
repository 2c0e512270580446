import os
from pathlib import Path

if os.environ.get("PYTEST_XDIST_WORKER"):
    # workers run side by side (pyproject addopts: -n auto): cores / workers torch threads each, set before
    # torch starts OpenMP and inherited by the train.py subprocesses; two workers with every core each
    # oversubscribe OpenMP and crawl
    _workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    _cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    os.environ["OMP_NUM_THREADS"] = str(max(_cores // _workers, 1))

import pytest  # noqa: E402
import torch  # noqa: E402
import warm_python  # noqa: E402

from vitpos.encodings import EncodingContext, create_encoding
from vitpos.models import VisionTransformer

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"


def small_vit(encoding="none", pool="gap", img_size=16, **kw):
    """A 2-block ViT on a 4x4 grid with head dim 16, in eval mode."""
    torch.manual_seed(0)
    opts = dict(img_size=img_size, patch_size=4, dim=32, depth=2, num_heads=2, mlp_ratio=2.0, pool=pool, drop_path=0.0)
    opts.update(kw)
    return VisionTransformer(encoding, **opts).eval()


class EvalModule(torch.nn.Module):
    """The part of a task module that ``vitpos.extrapolate.evaluate_sizes`` uses:
    ``encoding`` and ``evaluate_batch`` -> (summed loss, correct, count)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    @property
    def encoding(self):
        return self.model.pos

    def evaluate_batch(self, batch):
        x, y = batch
        logits = self.model(x)
        return torch.nn.functional.cross_entropy(logits, y, reduction="sum"), (logits.argmax(-1) == y).sum(), len(y)


def make_encoding(name, grid=(4, 4), dim=32, heads=2, depth=2, prefix=0, **options):
    torch.manual_seed(0)
    return create_encoding(name, EncodingContext(dim, heads, depth, grid, prefix), **options)


def cifar_root() -> Path | None:
    """The unpacked shared CIFAR-10 copy, or None (tests then skip, saying why;
    with VITPOS_REQUIRE_DATA=1, as in CI, they fail instead)."""
    root = Path(os.environ.get("VITPOS_CIFAR_ROOT", ROOT / "data" / "cifar10"))
    if (root / "train").is_dir() and (root / "test").is_dir():
        return root
    if os.environ.get("VITPOS_REQUIRE_DATA") == "1":
        pytest.fail(f"CIFAR-10 copy not found at {root} although VITPOS_REQUIRE_DATA=1")
    return None


def require_cifar() -> Path:
    root = cifar_root()
    if root is None:
        pytest.skip(
            "needs the CIFAR-10 copy: run `bash ../shared/datasets/unpack-cifar10.sh data` (or set VITPOS_CIFAR_ROOT)"
        )
    return root


def pytest_sessionstart(session):
    """Unpack the shared CIFAR-10 copy into data/ once, when it sits beside the repo (in the
    controller process: it runs before pytest-xdist starts the workers, which must not race it)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    script = ROOT.parent / "shared" / "datasets" / "unpack-cifar10.sh"
    if (
        "VITPOS_CIFAR_ROOT" not in os.environ
        and script.exists()
        and not (ROOT / "data" / "cifar10" / ".complete").exists()
    ):
        import subprocess

        subprocess.run(["bash", str(script), str(ROOT / "data")], check=True, stdout=subprocess.DEVNULL)


#: the slowest test files, longest first (worker-seconds on 2 cores before the warm interpreter of
#: tests/warm_python.py: readme ~514, learning ~210, sequence_model ~155, bad_input ~125,
#: native_resolution ~110, resume ~65, train ~55, ddp ~30, cli_help ~30; the warm interpreter takes
#: most of the imports out of readme, bad_input and cli_help), started before the rest so
#: pytest-xdist's two workers (one file each at a time, ``--dist loadfile``) finish together instead
#: of one long file starting last. ``--no-loadscope-reorder`` (pyproject addopts) keeps this order:
#: by default xdist sends the files with the most tests first.
LONG_FILES = (
    "test_readme.py",
    "test_learning.py",
    "test_sequence_model.py",
    "test_native_resolution.py",
    "test_resume.py",
    "test_train.py",
    "test_bad_input.py",
    "test_ddp.py",
    "test_cli_help.py",
)


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        name = item.path.name
        return LONG_FILES.index(name) if name in LONG_FILES else len(LONG_FILES)

    items.sort(key=rank)  # stable: every file's tests stay together and in their order


_WARM_ENV: dict[str, str] = {}  # filled by the warm_env fixture, read by warm_environment()


@pytest.fixture(scope="session")
def warm_env():
    """An environment in which ``python`` (on PATH) runs each command in a fresh child of one warm
    interpreter that imported torch, Lightning and timm once (tests/warm_python.py): about 6
    CPU-seconds saved per command. One server per test process, stopped at its end;
    ``VITPOS_COLD_PYTHON=1``: a fresh interpreter per command."""
    with warm_python.started(dict(os.environ)) as env:
        _WARM_ENV.update(env)
        yield env


def warm_environment(**extra: str) -> dict[str, str]:
    """The ``warm_env`` environment with ``extra`` set, for helpers that run commands in a test
    module marked ``pytestmark = pytest.mark.usefixtures("warm_env")``."""
    assert _WARM_ENV, "the test module needs pytestmark = pytest.mark.usefixtures('warm_env')"
    return {**_WARM_ENV, **extra}
