"""``metrics.json`` in a run folder, written atomically: ``{"status": "complete" | "diverged", "metrics": {...}, ...}``.
``complete`` is a run's last step, so rerunning the command prints these metrics instead of training again.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from vitpos.files import atomic_write_text

FILENAME = "metrics.json"


def write_status(folder: Path, status: str, metrics: dict[str, float] | None = None, **extra) -> Path:
    """Write ``folder/metrics.json`` (NaN as null); ``extra``: more keys, e.g. the divergence guard's ``reason``."""
    body = {"status": status, "metrics": {k: (None if math.isnan(v) else v) for k, v in (metrics or {}).items()}}
    return atomic_write_text(folder / FILENAME, json.dumps({**body, **extra}, indent=1, sort_keys=True) + "\n")


def read_status(folder: Path) -> dict | None:
    """The parsed ``metrics.json`` of a run folder, or None when it is absent or unreadable."""
    try:
        body = json.loads((folder / FILENAME).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict) or "status" not in body:
        return None
    body["metrics"] = {k: (math.nan if v is None else float(v)) for k, v in body.get("metrics", {}).items()}
    return body


def best_checkpoint(folder: Path, status: dict | None) -> Path | None:
    """The checkpoint ``test/acc`` scored, stored relative to the run folder (older runs: absolute)."""
    stored = (status or {}).get("best_checkpoint")
    return Path(folder) / stored if stored else None


def relative_to_run(folder: Path, path: str | Path | None) -> str | None:
    """``path`` as :func:`best_checkpoint` reads it back: relative to the run folder when inside it."""
    if not path:
        return None
    path, folder = Path(path).absolute(), Path(folder).absolute()
    return str(path.relative_to(folder)) if path.is_relative_to(folder) else str(path)


def save_predictions(out: Path, batches: list | None) -> None:
    """``test_predictions.npz``: the scored checkpoint's predicted and true class (uint8) of every test image,
    in test-set order, so a comparison can bootstrap over test images, not only over seeds."""
    if not batches:
        return
    import numpy as np

    predicted, true = (np.concatenate([x.numpy() for x in column]) for column in zip(*batches))
    with open(out / "test_predictions.npz", "wb") as f:
        np.savez_compressed(f, predicted=predicted, true=true)


def format_metrics(metrics: dict[str, float], folder: Path) -> str:
    """The run folder, then a metric a line: counts (``params``) as integers, the rest with four decimals."""
    width = max(map(len, metrics), default=0)
    lines = [f"run folder: {folder}"]
    words = {k: [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", k)] for k in metrics}  # len32 < len128
    for k, v in sorted(metrics.items(), key=lambda kv: words[kv[0]]):
        value = f"{int(v):,}" if k.startswith("params") and v == v else f"{v:.4f}"
        lines.append(f"  {k:<{width}}  {value}")
    return "\n".join(lines)
