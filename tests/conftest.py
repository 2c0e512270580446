import os
from pathlib import Path

if os.environ.get("PYTEST_XDIST_WORKER"):
    # workers run side by side (pyproject addopts: -n auto): cores / workers torch threads each, set before
    # torch starts OpenMP and inherited by the subprocesses of the tests; two workers with every core each
    # oversubscribe OpenMP and crawl
    _workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    _cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    os.environ["OMP_NUM_THREADS"] = str(max(_cores // _workers, 1))

import contextlib  # noqa: E402
import importlib  # noqa: E402
import importlib.util  # noqa: E402
import io  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402

import vitpos.config  # noqa: E402, F401  (registers the schemas the configs start from, as the command does)
from vitpos.encodings import EncodingContext, create_encoding
from vitpos.models import VisionTransformer
from vitpos.run.sweep import register_resolver

register_resolver()  # configs/sweep/image_encodings.yaml composes in process as it does under train.py

ROOT = Path(__file__).resolve().parents[1]

# an image run of a few seconds on generated data, quiet: the fault and reliability tests add their epochs
TINY_SHAPES_RUN = [
    "data=shapes", "data.num_train=192", "data.val_size=64", "data.num_test=64", "data.batch_size=32",
    "data.eval_batch_size=64", "model=vit_micro", "eval.resolutions=[]", "task.pictures=false",
    "trainer.enable_progress_bar=false",
]  # fmt: skip
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


def compose_train(*overrides: str):
    """``configs/train.yaml`` composed with ``overrides``, as ``python train.py OVERRIDES`` composes it."""
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose("train", overrides=list(overrides))


_TRAIN_PY = []  # the train.py module, loaded once per test process


def train_py():
    """``train.py`` (the file at the root, the command a user runs) loaded as a module: its
    ``main(argv)`` runs ``python train.py ARGV`` in this process."""
    if not _TRAIN_PY:
        spec = importlib.util.spec_from_file_location("train", ROOT / "train.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _TRAIN_PY.append(module)
    return _TRAIN_PY[0]


def exit_status(command: Callable[[], object]) -> int:
    """The exit status ``command()`` gives its process: 0 when it returns, else the code of its
    ``SystemExit`` (``None`` 0, an int itself, anything else printed and 1, as the interpreter does)."""
    try:
        command()
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    return 0


def command_main(prog: str) -> Callable[[list[str]], object]:
    """What ``python PROG ARGV`` runs, as a function of ARGV: ``train.py``'s ``main``, or for a
    module (``vitpos.viz``, ``bench.run``) the ``main`` of the module ``python -m`` runs (a
    package's ``__main__``) under :func:`vitpos.cli.run_main`, as its ``__main__`` block does."""
    from vitpos.cli.console import run_main

    if prog == "train.py":
        return train_py().main
    module = importlib.import_module(prog)
    if hasattr(module, "__path__"):  # a package: python -m runs its __main__
        module = importlib.import_module(f"{prog}.__main__")
    return lambda argv: run_main(module.main, argv)


@dataclass
class Ran:
    """How a command ended: its exit status and what it printed."""

    code: int
    out: str
    err: str


def run_command(prog: str, *argv: str, cwd: Path | None = None) -> Ran:
    """``python PROG ARGV`` run in this process from the folder ``cwd``, its stdout and stderr
    captured (what the ``vitpos`` logger and ``print`` write; Lightning's own lines are not)."""
    main = command_main(prog)
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    try:
        os.chdir(cwd or here)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = exit_status(lambda: main(list(argv)))
    finally:
        os.chdir(here)
    return Ran(code, out.getvalue(), err.getvalue())


def finished_run(root: Path, *overrides: str) -> Path:
    """Train ``python train.py OVERRIDES run.root=ROOT`` in ROOT's parent folder and return the one
    run folder it made (where its ``metrics.json`` is); a run that does not finish fails the test
    with its output."""
    ran = run_command("train.py", *overrides, f"run.root={root}", cwd=root.parent)
    assert ran.code == 0, ran.out + ran.err
    (status,) = root.rglob("metrics.json")
    return status.parent


@pytest.fixture
def tmpfs(tmp_path):
    """A folder to mount a tmpfs on (the test mounts it with the size it needs); unmounted after.
    Used by tests/test_disk_faults.py and tests/test_export_faults.py."""
    where = tmp_path / "disk"
    where.mkdir()
    yield where
    subprocess.run(["umount", str(where)], capture_output=True)


def cifar_root() -> Path | None:
    """The unpacked shared CIFAR-10 copy, or None (tests then skip, saying why;
    with VITPOS_REQUIRE_DATA=1, as in CI, they fail instead)."""
    root = Path(os.environ.get("VITPOS_CIFAR_ROOT", ROOT / "data" / "cifar10"))
    if (root / "train").is_dir() and (root / "test").is_dir():
        return root
    if os.environ.get("VITPOS_REQUIRE_DATA") == "1":
        pytest.fail(f"CIFAR-10 copy not found at {root} although VITPOS_REQUIRE_DATA=1")
    return None


def require_reference(module: str):
    """The installed reference package ``module`` (a dev dependency: ``pip install -e '.[dev]'``). A test
    that cannot find its reference fails, never skips: a missing reference would pass for a match."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        pytest.fail(f"the reference {module} is not installed ({err}): pip install -e '.[dev]'")


def require_cifar() -> Path:
    root = cifar_root()
    if root is None:
        pytest.skip(
            "needs the CIFAR-10 copy: run `bash ../shared/datasets/unpack-cifar10.sh data` (or set VITPOS_CIFAR_ROOT)"
        )
    return root


def starts_project_code(args) -> bool:
    """Whether a command line runs this project's code: torchrun, a shell script, or Python running a script,
    ``-m vitpos...``/``-m bench...`` or a ``-c`` snippet that names vitpos. Not: torch's own helpers (inductor's
    ``-c`` load check of a compiled kernel), a sleeping placeholder process, compilers, ``mount``."""
    argv = shlex.split(args) if isinstance(args, str) else [str(a) for a in args]
    program = Path(argv[0]).name if argv else ""
    if program in ("torchrun", "bash", "sh"):
        return True
    if not program.startswith("python"):
        return False
    flag, value = (argv[1:3] + ["", ""])[:2]
    if flag == "-c":
        return "vitpos" in value
    if flag == "-m":
        return value.split(".")[0] in ("vitpos", "bench")
    return True  # a script


@pytest.fixture(autouse=True)
def fast_tests_start_no_program(request, monkeypatch):
    """The tier rule, enforced: a test that starts the project's code in another process is ``slow``."""
    if request.node.get_closest_marker("slow"):
        return
    start = subprocess.Popen.__init__

    def refuse_project_code(self, args, *rest, **options):
        if starts_project_code(args):
            pytest.fail(f"a fast test started {args!r}: mark it @pytest.mark.slow (the tier rule, CONTRIBUTING.md)")
        start(self, args, *rest, **options)

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse_project_code)


def pytest_collection_modifyitems(config, items):
    """Files holding a test marked ``long`` go first, the others keep their order: a test of minutes
    that starts last would keep its worker busy long after the other has finished (pytest-xdist's
    worksteal hands each worker half of the tests in this order: pyproject addopts)."""
    long_files = {item.path for item in items if item.get_closest_marker("long")}
    items.sort(key=lambda item: item.path not in long_files)  # stable: each file's tests stay together, in order


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
