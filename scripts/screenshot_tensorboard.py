"""Screenshots of TensorBoard's SCALARS and HPARAMS views, for the README.

    python scripts/screenshot_tensorboard.py train=true                     # short real run, then screenshots
    python scripts/screenshot_tensorboard.py logdir=runs/compare_cifar_quick  # screenshots of existing runs

The options and the ``--help`` text are :class:`ScreenshotOptions`. A dev tool, not used by the tests.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from vitpos.cli.console import run_main
from vitpos.cli.options import option, parse_options

ROOT = Path(__file__).resolve().parents[1]
ENCODINGS = "sincos_2d,rope_2d"
TRAIN = [  # the short real run behind the screenshots
    "-m",
    "data.format=imagefolder",
    "data.root=data/cifar10",
    "model=vit_micro",
    "data.train_subset=2000",
    "data.test_subset=500",
    "data.batch_size=64",
    "optim.lr=2e-3",
    "optim.warmup_epochs=0.5",
    "trainer.max_epochs=4",
    "trainer.log_every_n_steps=4",
    "trainer.enable_progress_bar=false",
    "eval.resolutions=[24,32,48]",
    f"encoding={ENCODINGS}",
]
# (file name, URL fragment, browser window "W,H" in CSS pixels, device scale):
# the SCALARS dashboard as it opens (train/, then val/), and the HPARAMS table, laid
# out wide enough for its metric columns and drawn at 0.7 so the PNG stays ~1800 px.
VIEWS = [
    (
        "tensorboard_scalars.png",
        "#scalars",
        "1800,1000",
        1.0,
    ),
    ("tensorboard_hparams.png", "#hparams", "2600,560", 0.7),
]
_http = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_runs(base: str, expected: int, timeout_s: float = 120) -> list[str]:
    """The run names, once the server lists at least ``expected`` of them."""
    deadline, runs = time.monotonic() + timeout_s, []
    while time.monotonic() < deadline:
        try:
            with _http.open(f"{base}/data/runs", timeout=10) as r:
                runs = json.loads(r.read())
            if len(runs) >= expected:
                return runs
        except OSError:
            pass  # not listening yet
        time.sleep(1)
    raise SystemExit(f"tensorboard listed {runs} after {timeout_s} s; expected {expected} runs")


def screenshot(browser: str, url: str, path: Path, size: str, scale: float, budget_ms: int) -> None:
    cmd = [
        browser,
        "--headless=new",
        "--no-sandbox",  # root in a container
        "--disable-gpu",
        "--hide-scrollbars",
        f"--force-device-scale-factor={scale}",
        f"--window-size={size}",
        f"--virtual-time-budget={budget_ms}",
        f"--screenshot={path}",
        url,
    ]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    print(f"wrote {path} ({path.stat().st_size} bytes) from {url}")


@dataclass
class ScreenshotOptions:
    """Screenshots of TensorBoard's SCALARS and HPARAMS views: tensorboard_scalars.png and
    tensorboard_hparams.png in out=.

    With train=true, a short sweep first trains on the CIFAR-10 ImageFolder copy (data/cifar10;
    two encodings, vit_micro, a few epochs on a subset: a few minutes on a CPU) into logdir=.
    Then tensorboard starts on a free loopback port, and once every run is loaded, headless
    Chromium (the Debian chromium package: apt-get install -y chromium) renders each view,
    waiting budget_ms of virtual time so that the charts are drawn before the picture is taken.

    Examples:
      python scripts/screenshot_tensorboard.py train=true
      python scripts/screenshot_tensorboard.py logdir=runs/compare_cifar_quick out=screenshots
    """

    logdir: str = option("runs/screenshots", "the runs to show (written by train=true)", metavar="DIR")
    train: bool = option(False, "first run the short real sweep into logdir=")
    out: str = option(str(ROOT / "docs" / "screenshots"), "the folder for the two PNGs", metavar="DIR",
                      default_text="docs/screenshots: REWRITES the committed pictures")  # fmt: skip
    budget_ms: int = option(20000, "virtual time Chromium waits before the picture")


def main(argv: list[str] | None = None) -> None:
    a = parse_options(argv, ScreenshotOptions, prog="python scripts/screenshot_tensorboard.py")
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        raise SystemExit("no Chromium found: apt-get install -y chromium")
    logdir = Path(a.logdir).resolve()
    if a.train:
        subprocess.run([sys.executable, str(ROOT / "train.py"), *TRAIN, f"run.root={logdir}"], cwd=ROOT, check=True)
    expected = sum(1 for _ in logdir.rglob("hparams.yaml")) or 1
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    tb = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", logdir.name, "--host", "127.0.0.1", "--port", str(port)],
        cwd=logdir.parent,  # the page then shows the folder as a user types it (runs), not a temp path
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        print("runs:", ", ".join(wait_for_runs(base, expected)))
        for name, fragment, size, scale in VIEWS:
            screenshot(browser, f"{base}/{fragment}", out / name, size, scale, a.budget_ms)
    finally:
        tb.terminate()
        tb.wait(timeout=20)


if __name__ == "__main__":
    run_main(main)  # a bad option: one line, exit 2
