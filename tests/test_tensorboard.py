"""TensorBoard as a user sees it.

A short sweep (``python train.py -m ...``: 2 tiny runs), then the real
``tensorboard --logdir runs`` server on a free loopback port, asked through the
HTTP API its web page uses: the runs are listed, the SCALARS, HPARAMS and
IMAGES dashboards are active, every run has the training and validation curves
and only curves in SCALARS (so the page opens on them), the final
numbers are TEXT tables, the HPARAMS table has a row per run with the encoding
and the final validation accuracy, and the pictures are PNGs that can be
fetched. The server is always stopped, and it listens on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from conftest import ROOT

ENCODINGS = ("none", "rope_2d")
SWEEP = [
    "-m",
    "data=shapes",
    "model=vit_micro",
    "data.num_train=256",
    "data.num_test=128",
    "data.val_size=64",
    "trainer.max_epochs=2",
    "trainer.log_every_n_steps=1",  # 2 steps an epoch: a train/loss point at every step
    "trainer.enable_progress_bar=false",
    "eval.resolutions=[24]",
    f"encoding={','.join(ENCODINGS)}",
]
SCALARS = ("train/loss", "val/acc", "val/loss")
STARTUP_S = 120  # the server's start and its first scan of the event files

pytestmark = pytest.mark.slow

# Loopback requests must never go through an HTTP proxy set in the environment.
_http = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def run_of_encoding(names: list[str], encoding: str) -> str | None:
    """The run whose folder is the encoding's (``.../<encoding>-<hash>/seed0``)."""
    pattern = re.compile(rf"{re.escape(encoding)}(-[0-9a-f]{{6}})?")
    return next((n for n in names if any(pattern.fullmatch(part) for part in n.split("/"))), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, **query) -> bytes:
    if query:
        url += "?" + urllib.parse.urlencode(query)
    with _http.open(url, timeout=30) as response:
        return response.read()


def get_json(url: str, **query):
    return json.loads(get(url, **query))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """(base URL, TensorBoard run name per encoding, run.root) for a server on a 2-run sweep."""
    work = tmp_path_factory.mktemp("tb")
    runs = work / "runs"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *SWEEP, f"run.root={runs}"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, f"the sweep failed:\n{(proc.stdout + proc.stderr)[-3000:]}"
    port = free_port()
    cmd = [sys.executable, "-m", "tensorboard.main", "--logdir", str(runs), "--host", "127.0.0.1", "--port", str(port)]
    log = open(work / "tensorboard.log", "w")  # noqa: SIM115 (closed in the finally below)
    tb = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline, names = time.monotonic() + STARTUP_S, []
        while time.monotonic() < deadline:
            assert tb.poll() is None, f"tensorboard exited:\n{(work / 'tensorboard.log').read_text()[-2000:]}"
            try:
                names = get_json(f"{base}/data/runs")
                if all(run_of_encoding(names, e) for e in ENCODINGS):
                    break
            except (urllib.error.URLError, ConnectionError):
                pass  # not listening yet
            time.sleep(1)
        else:
            pytest.fail(f"tensorboard listed {names} after {STARTUP_S} s, expected a run per encoding {ENCODINGS}")
        run_of = {e: run_of_encoding(names, e) for e in ENCODINGS}
        yield base, run_of, runs
    finally:
        tb.terminate()
        try:
            tb.wait(timeout=20)
        except subprocess.TimeoutExpired:
            tb.kill()
            tb.wait()
        log.close()


def test_scalars_hparams_and_images_dashboards_are_active(server):
    base, _, _ = server
    plugins = get_json(f"{base}/data/plugins_listing")
    for name in ("scalars", "hparams", "images"):
        assert plugins.get(name, {}).get("enabled"), f"dashboard {name} inactive; listing: {sorted(plugins)}"


def test_every_run_has_its_curves(server):
    base, run_of, runs = server
    tags = get_json(f"{base}/data/plugin/scalars/tags")
    for run in run_of.values():
        missing = [t for t in SCALARS if t not in tags.get(run, {})]
        assert not missing, f"run {run} lacks scalars {missing}; it has {sorted(tags.get(run, {}))}"
        # no wall of single-point charts (hp/* copies, one per size and strategy): the sweep is a table
        clutter = [t for t in tags[run] if t.startswith("hp/") or t == "epoch" or "@" in t]
        assert not clutter, f"run {run}: single-point charts in SCALARS: {clutter}"
        # only curves: the single-point final numbers (test/*, time/*) would come first (groups sort alphabetically)
        groups = {t.split("/")[0] for t in tags[run]}  # the learning rate is train/lr/pg*, not an lr-AdamW group
        assert groups == {"train", "val"}, f"run {run}: tag groups {sorted(groups)}"
        assert "train/lr/pg1" in tags[run], f"run {run}: no train/lr/pg1 among {sorted(tags[run])}"
        points = get_json(f"{base}/data/plugin/scalars/scalars", run=run, tag="train/loss")
        assert len(points) >= 2, f"{run}: train/loss has {len(points)} points for 4 steps"
        wall, step, value = points[-1]
        assert step > 0 and value == value, f"{run}: last train/loss point {points[-1]}"
        val = get_json(f"{base}/data/plugin/scalars/scalars", run=run, tag="val/acc")
        steps = [s for _, s, _ in val]  # HPARAMS names val/acc as a column: no extra point may be logged
        assert len(steps) == 2 and steps == sorted(set(steps)), f"{run}: val/acc steps {steps}, 2 validations"


def test_hparams_table_has_a_row_per_run_with_encoding_and_accuracy(server):
    base, run_of, runs = server
    experiment = get_json(f"{base}/data/plugin/hparams/experiment", request=json.dumps({"experimentName": ""}))
    hparams = {h["name"] for h in experiment.get("hparamInfos", [])}
    metrics = {m["name"]["tag"] for m in experiment.get("metricInfos", [])}
    assert {"encoding", "seed"} <= hparams, f"HPARAMS columns: {sorted(hparams)}"
    assert {"val/acc", "val/loss", "train/loss"} <= metrics, f"HPARAMS metrics: {sorted(metrics)}"
    request = {
        "experimentName": "",
        "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"],
        "colParams": [{"hparam": "encoding"}, {"metric": {"tag": "val/acc", "group": ""}}],
        "startIndex": 0,
        "sliceSize": 100,
    }
    groups = get_json(f"{base}/data/plugin/hparams/session_groups", request=json.dumps(request))
    rows = {g["hparams"]["encoding"]: g for g in groups.get("sessionGroups", [])}
    assert set(ENCODINGS) <= set(rows), f"HPARAMS rows for encodings {sorted(rows)}, expected {ENCODINGS}"
    for encoding in ENCODINGS:
        values = {m["name"]["tag"]: m["value"] for m in rows[encoding].get("metricValues", [])}
        last = get_json(f"{base}/data/plugin/scalars/scalars", run=run_of[encoding], tag="val/acc")[-1][2]
        assert values.get("val/acc") == pytest.approx(last), f"{encoding}: HPARAMS metric values {values}, last {last}"


def test_every_run_shows_pictures_that_load_as_png(server):
    base, run_of, runs = server
    tags = get_json(f"{base}/data/plugin/images/tags")
    for run in run_of.values():
        pictures = sorted(t for t in tags.get(run, {}) if t.startswith("pictures/"))
        assert pictures, f"run {run} has no pictures; image tags: {sorted(tags.get(run, {}))}"
        entries = get_json(f"{base}/data/plugin/images/images", run=run, tag=pictures[0], sample=0)
        assert entries, f"{run}: no image under {pictures[0]}"
        png = get(f"{base}/data/plugin/images/individualImage?{entries[-1]['query']}")
        assert png[:8] == b"\x89PNG\r\n\x1a\n", f"{run} {pictures[0]}: not a PNG"


def test_every_run_shows_its_resolution_sweep_as_one_text_table(server):
    """The accuracies beyond the training size are one Markdown table in the TEXT tab (a row per
    strategy, a column per size), not one single-point scalar chart each."""
    base, run_of, runs = server
    tags = get_json(f"{base}/data/plugin/text/tags")
    for run in run_of.values():
        (tag,) = [t for t in tags.get(run, []) if t.startswith("test/beyond_training_size")]  # + /text_summary
        entries = get_json(f"{base}/data/plugin/text/text", run=run, tag=tag)
        html = entries[-1]["text"]
        assert "<table" in html and "24" in html and "default" in html, f"{run}: {html[:500]}"


def test_every_run_shows_its_final_numbers_as_one_text_table(server):
    """test/acc, test/loss, val/acc_best and the minutes: a TEXT table, the same numbers as metrics.json."""
    base, run_of, runs = server
    tags = get_json(f"{base}/data/plugin/text/tags")
    for encoding, run in run_of.items():
        (tag,) = [t for t in tags.get(run, []) if t.startswith("test/final")]
        html = get_json(f"{base}/data/plugin/text/text", run=run, tag=tag)[-1]["text"]
        metrics = json.loads(next(p for p in runs.rglob("metrics.json") if run_of_encoding([str(p.parent)], encoding))
                             .read_text())["metrics"]  # fmt: skip
        for name in ("test/acc", "test/loss", "val/acc_best", "time/fit_min"):
            assert name in html, f"{run}: {name} missing from the final table: {html[:500]}"
        assert f"{100 * metrics['test/acc']:.2f}%" in html, f"{run}: test/acc {metrics['test/acc']} not in {html[:500]}"
