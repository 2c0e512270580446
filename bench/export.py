"""``python -m bench.export``: every image encoding exported to ONNX and torch.export, checked
against PyTorch eager, and onnxruntime's CPU latency for one image against eager's: the table of
docs/export.md and the latencies of docs/results/export_latency.csv (``write=true`` rewrites both).

Each encoding (the list every full comparison sweeps: :func:`vitpos.run.sweep.image_encodings`),
with each of its strategies for unseen sizes (the ones the extrapolation evaluates:
``eval.strategies=all``), is put in the same tiny ViT (:data:`TINY`: 16x16 images, patch 4, width
32, 2 blocks) and exported by
:func:`vitpos.export.export_model`, which keeps the broadest size range whose graph agrees with the
eager model. The page's table holds what the export decides (size ranges, differences from eager),
which tests/test_export_table.py recomputes and compares; the latencies depend on the machine, so
they live in their own file, each row with the machine and the date it was measured on, and no
test reads them.
"""

from __future__ import annotations

import csv
import datetime
import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from bench.timing import interleaved_medians, use_threads
from vitpos.cli.console import run_main
from vitpos.cli.options import option, parse_options
from vitpos.errors import UserError
from vitpos.export import FORMATS, Exported, ExportFailed, export_model, geometry_of
from vitpos.export.graph import ort_session
from vitpos.extrapolate.evaluate import choose_strategies
from vitpos.models import VisionTransformer
from vitpos.run.sweep import image_encodings
from vitpos.runtime import cpu_supports_bf16
from vitpos.tables import markdown_table

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "export.md"
#: the machine-timed latencies of the page's rows: measured, never compared
LATENCY = ROOT / "docs" / "results" / "export_latency.csv"
LATENCY_FIELDS = ["encoding", "strategy", "onnxruntime_ms", "eager_ms", "eager_over_onnxruntime", "machine", "measured"]
#: the model every encoding is exported in: small enough for a test per encoding
TINY = dict(img_size=16, patch_size=4, dim=32, depth=2, num_heads=2, mlp_ratio=2.0, drop_path=0.0)
#: the sizes the table shows a difference at: the training size, a non-square one, a smaller one
SHOWN = ((16, 16), (16, 32), (8, 8))
SCOPE = {"any size": "any", "from the training size up": "≥ 16x16", "fixed size": "16x16 only"}
OPEN, CLOSE = "<!-- export table: python -m bench.export write=true -->\n", "<!-- end export table -->"
HEADER = ["encoding", "strategy", "ONNX sizes", "torch.export sizes", *(f"max diff {h}x{w}" for h, w in SHOWN)]
CHECKED = len(HEADER)  # the columns tests/test_export_table.py compares: all of them


def tiny_model(name: str, strategy: str | None = None) -> VisionTransformer:
    """The :data:`TINY` ViT with the encoding ``name`` and ``strategy`` (default: the encoding's),
    seeded, in eval mode."""
    torch.manual_seed(0)
    model = VisionTransformer({"name": name}, **TINY).eval()
    if strategy is not None:
        model.pos.strategy = strategy
    return model


def table_keys(names: list[str], strategies: str = "all") -> list[tuple[str, str]]:
    """(encoding, strategy) of every row: each encoding with every distinct strategy it offers
    (``all``, default first; ``error`` left out: it refuses every other size), or its default."""
    keys = [(name, s) for name in names for s in choose_strategies(tiny_model(name).pos, strategies)]
    return [(name, tiny_model(name, s).pos.strategy) for name, s in keys]  # the name the model reports


@dataclass
class Row:
    """One encoding: the exported graph of each format (or why none), and the latencies."""

    encoding: str
    strategy: str
    graphs: dict[str, Exported | str]
    latency: tuple[float, float] | None = None  # (onnxruntime, eager) seconds for one image


def export_row(name: str, strategy: str | None = None, latency: bool = True, repeats: int = 50) -> Row:
    """Export the tiny model of ``name`` with ``strategy`` in every format; time ONNX against
    eager if asked."""
    model = tiny_model(name, strategy)
    geo = geometry_of(model, (TINY["img_size"], TINY["img_size"]))
    graphs: dict[str, Exported | str] = {}
    traces: dict = {}  # one torch.export trace per range, for both formats
    for fmt in FORMATS:
        try:
            graphs[fmt] = export_model(model, geo, fmt, traces)
        except ExportFailed as err:
            graphs[fmt] = str(err)
    row = Row(name, model.pos.strategy, graphs)
    if latency and isinstance(graphs["onnx"], Exported):
        session = ort_session(graphs["onnx"].artifact, threads=torch.get_num_threads())
        image = geo.example(batch=1)
        feed = {"images": image.numpy()}

        def eager():
            with torch.inference_mode():
                model(image)

        desc = f"{name} {model.pos.strategy}"
        times = interleaved_medians({"onnx": lambda: session.run(None, feed), "eager": eager}, repeats, desc=desc)
        row.latency = (times["onnx"], times["eager"])
    return row


def diff_cell(row: Row, size: tuple[int, int]) -> str:
    """``ONNX / torch.export`` largest difference at ``size``; ``-`` where the graph does not take it."""
    parts = []
    for fmt in FORMATS:
        graph = row.graphs[fmt]
        diff = graph.diffs.get(size) if isinstance(graph, Exported) else None
        parts.append("-" if diff is None else f"{diff:.0e}" if diff else "0")
    return " / ".join(parts)


def cells(row: Row) -> list[str]:
    """The row of the table (:data:`HEADER`): what the export decided, nothing timed."""
    scopes = [SCOPE[g.scope] if isinstance(g, Exported) else "fails" for g in (row.graphs[f] for f in FORMATS)]
    return [f"`{row.encoding}`", row.strategy, *scopes, *(diff_cell(row, s) for s in SHOWN)]


def latency_record(row: Row, where: str, day: str) -> dict[str, str] | None:
    """The row of the latency file (:data:`LATENCY_FIELDS`), or None where no ONNX graph was timed."""
    if row.latency is None:
        return None
    ort_s, eager_s = row.latency
    return dict(encoding=row.encoding, strategy=row.strategy, onnxruntime_ms=f"{1e3 * ort_s:.2f}",
                eager_ms=f"{1e3 * eager_s:.2f}", eager_over_onnxruntime=f"{eager_s / ort_s:.1f}",
                machine=where, measured=day)  # fmt: skip


def machine() -> str:
    """The CPU model and the versions that made the latencies."""
    import onnxruntime

    cpu = platform.processor() or platform.machine()
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    found = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
    cpu = f"{os.cpu_count()}-core {found.group(1).strip() if found else cpu}"
    if cpu_supports_bf16():  # the rule trainer.precision=auto follows
        cpu += " with AVX512-BF16"
    elif torch.backends.cpu.get_cpu_capability() == "AVX2":
        cpu += " with AVX2 only (no AVX512-BF16)"
    threads = torch.get_num_threads()
    return (f"{cpu}, {threads} thread{'s' if threads > 1 else ''}, torch {torch.__version__.split('+')[0]}, "
            f"onnxruntime {onnxruntime.__version__}")  # fmt: skip


def render(rows: list[Row], where: str) -> str:
    """The table, then the latencies (one 16x16 image) and the machine they were measured on."""
    timed = [[f"`{r.encoding}`", r.strategy, f"{1e3 * r.latency[0]:.2f}", f"{1e3 * r.latency[1]:.2f}",
              f"{r.latency[1] / r.latency[0]:.1f}x"] for r in rows if r.latency is not None]  # fmt: skip
    latencies = markdown_table(["encoding", "strategy", "onnxruntime ms", "eager ms", "eager / onnxruntime"], timed)
    return f"{table_of(rows)}\n\nLatencies: median of one 16x16 image, {where}.\n\n{latencies}\n"


def table_of(rows: list[Row]) -> str:
    """The page's table block: every row's cells."""
    return markdown_table(HEADER, [cells(r) for r in rows]) + "\n"


def committed_rows(text: str) -> dict[tuple[str, str], list[str]]:
    """The rows of the table in a page's block, by (encoding, strategy): the first two cells."""
    start, end = text.index(OPEN) + len(OPEN), text.index(CLOSE)
    lines = [line for line in text[start:end].splitlines() if line.startswith("| `")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    return {(r[0].strip("`"), r[1]): r for r in rows}


def refresh(text: str, table: str) -> str:
    """``text`` with its table block replaced by ``table``."""
    start, end = text.index(OPEN) + len(OPEN), text.index(CLOSE)
    return text[:start] + table + text[end:]


@dataclass
class ExportBenchOptions:
    """Export every image encoding, with each of its strategies, in a tiny ViT to ONNX and
    torch.export, check both against PyTorch eager at three sizes, time onnxruntime (CPU) against
    eager for one image, and print the table of docs/export.md and the latencies (write=true
    rewrites the table there and the latencies in docs/results/export_latency.csv).

    Examples:
      python -m bench.export encodings=[none,rope_2d] strategies=default repeats=5
    """

    encodings: list[str] | None = option(None, "the encodings", metavar="[NAME,...]", example="[rope_2d]",
                                         default_text="every image encoding the comparisons sweep")  # fmt: skip
    strategies: str = option("all", "each encoding's strategies: all, or its default only",
                             choices=["all", "default"])  # fmt: skip
    repeats: int = option(50, "timed rounds per encoding")
    threads: int = option(1, "torch and onnxruntime threads (one each by default: their pools contend)")
    note: str = option("", "appended to the machine line (e.g. measured beside a training sweep)")
    write: bool = option(False, "rewrite the table in docs/export.md and the latencies in "
                                "docs/results/export_latency.csv")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    opts = parse_options(argv, ExportBenchOptions, prog="python -m bench.export")
    use_threads(opts.threads)
    if opts.write and opts.strategies != "all":
        raise UserError("write", "the page's table holds every strategy of an encoding, not a subset",
                        "drop strategies= to write it")  # fmt: skip
    keys = table_keys(opts.encodings or image_encodings(), opts.strategies)
    rows = [export_row(name, strategy, repeats=opts.repeats) for name, strategy in keys]
    where = machine() + (f"; {opts.note}" if opts.note else "")
    print(render(rows, where))
    if opts.write:
        text = PAGE.read_text()
        PAGE.write_text(refresh(text, merged(text, rows) if opts.encodings else table_of(rows)))
        day = datetime.date.today().isoformat()
        records = [r for r in (latency_record(row, where, day) for row in rows) if r is not None]
        write_latencies(merged_latencies(read_latencies(), records, {r.encoding for r in rows}))
        print(f"wrote the rows of {', '.join(opts.encodings or ['every encoding'])} in {PAGE.relative_to(ROOT)} "
              f"and {LATENCY.relative_to(ROOT)}")  # fmt: skip
    return 0


def merged(text: str, rows: list[Row]) -> str:
    """The page's table with the rows of the encodings just measured (added or replaced), the others
    as committed, in the order of the sweep list."""
    committed, new = committed_rows(text), {(r.encoding, r.strategy): cells(r) for r in rows}
    names = {r.encoding for r in rows}
    table = [new[key] if key[0] in names else committed[key] for key in table_keys(image_encodings(), "all")
             if key in new or key in committed]  # fmt: skip
    return markdown_table(HEADER, table) + "\n"


def read_latencies() -> list[dict[str, str]]:
    """The committed latency rows (none when the file is not there yet)."""
    if not LATENCY.exists():
        return []
    with LATENCY.open(newline="") as f:
        return list(csv.DictReader(f))


def merged_latencies(old: list[dict[str, str]], new: list[dict[str, str]], names: set[str]) -> list[dict[str, str]]:
    """The rows of the encodings ``names`` replaced by ``new`` (each new row with its own machine and
    date), the other encodings' rows kept as measured, in the order of the page's table."""
    rows = {(r["encoding"], r["strategy"]): r for r in old if r["encoding"] not in names}
    rows.update({(r["encoding"], r["strategy"]): r for r in new})
    order = {key: i for i, key in enumerate(table_keys(image_encodings(), "all"))}
    return sorted(rows.values(), key=lambda r: order.get((r["encoding"], r["strategy"]), len(order)))


def write_latencies(rows: list[dict[str, str]]) -> None:
    with LATENCY.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=LATENCY_FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    run_main(main)
