"""Training what a plan holds, and the verdict of its runs beside the compared ones."""

from __future__ import annotations

import shutil
from pathlib import Path

from vitpos.benchmark.minutes import encoding_of
from vitpos.benchmark.plan import Plan
from vitpos.benchmark.verdict import verdict_lines
from vitpos.compare import compare
from vitpos.run.identity import run_dir


def score(p: Plan, out: Path, encoding: str) -> list[str]:
    """Train what ``p`` plans (one line per run), write the report of the new runs beside the compared
    ones (``out/<protocol>/report``) and the verdict (``out/<protocol>/verdict.txt``); return the verdict."""
    from vitpos.train import train

    folders, table = [], {}
    for i, run in enumerate(p.runs, 1):
        where = f"[{p.protocol} {i}/{len(p.runs)}] {run.encoding} seed {run.seed}"
        print(where, flush=True)
        metrics = train(run.cfg)  # a finished run is read, an interrupted one resumes
        folders.append(run_dir(run.cfg).parent)
        acc = metrics.get("test/acc", float("nan"))
        table.setdefault(run.encoding, {})[run.seed] = acc
        print(f"{where}: test/acc {acc:.4f}", flush=True)
    for c in p.committed:  # an encoding trained here keeps its runs from here
        name = encoding_of(c)
        if name not in {r.encoding for r in p.runs} and c.seed is not None:
            table.setdefault(name, {})[c.seed] = c.status["metrics"]["test/acc"]
    combined = out / p.protocol / "combined"  # the runs the report reads, without their checkpoints
    shutil.rmtree(combined, ignore_errors=True)
    # <model>/<label> folders, every seed: the committed ones first, then this machine's over them
    for folder in [*dict.fromkeys(c.path.parent for c in p.committed), *dict.fromkeys(folders)]:
        shutil.copytree(folder, combined / folder.parent.name / folder.name,
                        ignore=shutil.ignore_patterns("*.ckpt"), dirs_exist_ok=True)  # fmt: skip
    report = out / p.protocol / "report"
    compare(combined, report)
    lines = verdict_lines(p.protocol, table, encoding, p.runs[0].minutes, p.kind)
    lines.append(f"  side by side: {report / 'report.md'} (its letters test every pair of that table again: "
                 "the verdict above and the committed report are the ones to read)")  # fmt: skip
    (out / p.protocol / "verdict.txt").write_text("\n".join(lines) + "\n")
    return lines
