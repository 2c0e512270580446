"""``python -m bench.export``: every image encoding exported to ONNX and torch.export, checked
against PyTorch eager, and onnxruntime's CPU latency for one image against eager's: the table of
docs/export.md (``write=true`` rewrites it there).

Each encoding (the list every full comparison sweeps: :func:`vitpos.run.sweep.image_encodings`),
with each of its strategies for unseen sizes (the ones the extrapolation evaluates:
``eval.strategies=all``), is put in the same tiny ViT (:data:`TINY`: 16x16 images, patch 4, width
32, 2 blocks) and exported by
:func:`vitpos.export.export_model`, which keeps the broadest size range whose graph agrees with the
eager model. tests/test_export_table.py recomputes every row but the latencies and compares it with
the committed page; latencies depend on the machine and are never asserted.
"""

from __future__ import annotations

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
#: the model every encoding is exported in: small enough for a test per encoding
TINY = dict(img_size=16, patch_size=4, dim=32, depth=2, num_heads=2, mlp_ratio=2.0, drop_path=0.0)
#: the sizes the table shows a difference at: the training size, a non-square one, a smaller one
SHOWN = ((16, 16), (16, 32), (8, 8))
SCOPE = {"any size": "any", "from the training size up": "≥ 16x16", "fixed size": "16x16 only"}
OPEN, CLOSE = "<!-- export table: python -m bench.export write=true -->\n", "<!-- end export table -->"
HEADER = ["encoding", "strategy", "ONNX sizes", "torch.export sizes",
          *(f"max diff {h}x{w}" for h, w in SHOWN), "onnxruntime ms", "eager ms", "eager / onnxruntime"]  # fmt: skip
CHECKED = 2 + len(FORMATS) + len(SHOWN)  # the columns tests/test_export_table.py compares (then latencies)


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
    """The row of the table (:data:`HEADER`)."""
    scopes = [SCOPE[g.scope] if isinstance(g, Exported) else "fails" for g in (row.graphs[f] for f in FORMATS)]
    timing = ["", "", ""]
    if row.latency is not None:
        ort_s, eager_s = row.latency
        timing = [f"{1e3 * ort_s:.2f}", f"{1e3 * eager_s:.2f}", f"{eager_s / ort_s:.1f}x"]
    return [f"`{row.encoding}`", row.strategy, *scopes, *(diff_cell(row, s) for s in SHOWN), *timing]


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


def render(rows: list[Row], note: str) -> str:
    """The table and the line that says where its latencies were measured."""
    where = f"Latencies: median of one 16x16 image, {machine()}" + (f"; {note}" if note else "") + "."
    return markdown_table(HEADER, [cells(r) for r in rows]) + "\n\n" + where + "\n"


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
    eager for one image, and print the table of docs/export.md (write=true rewrites it there).

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
    write: bool = option(False, "rewrite the table in docs/export.md")


def main(argv: list[str] | None = None) -> int:
    opts = parse_options(argv, ExportBenchOptions, prog="python -m bench.export")
    use_threads(opts.threads)
    if opts.write and opts.strategies != "all":
        raise UserError("write", "the page's table holds every strategy of an encoding, not a subset",
                        "drop strategies= to write it")  # fmt: skip
    keys = table_keys(opts.encodings or image_encodings(), opts.strategies)
    rows = [export_row(name, strategy, repeats=opts.repeats) for name, strategy in keys]
    table = render(rows, opts.note)
    print(table)
    if opts.write:
        text = PAGE.read_text()
        PAGE.write_text(refresh(text, merged(text, rows, opts.note) if opts.encodings else table))
        print(f"wrote the rows of {', '.join(opts.encodings or ['every encoding'])} in {PAGE.relative_to(ROOT)}")
    return 0


def merged(text: str, rows: list[Row], note: str) -> str:
    """The page's table with the rows of the encodings just measured (added or replaced), the others
    as committed, in the order of the sweep list; a line says where the new rows were measured."""
    committed, new = committed_rows(text), {(r.encoding, r.strategy): cells(r) for r in rows}
    names = {r.encoding for r in rows}
    table = [new[key] if key[0] in names else committed[key] for key in table_keys(image_encodings(), "all")
             if key in new or key in committed]  # fmt: skip
    start, end = text.index(OPEN) + len(OPEN), text.index(CLOSE)
    footer = [line for line in text[start:end].splitlines() if line.startswith("Latencies") or line.startswith("Rows ")]
    footer = [line for line in footer if not line.startswith(f"Rows of {', '.join(sorted(names))}:")]
    where = f"Rows of {', '.join(sorted(names))}: {machine()}" + (f"; {note}" if note else "") + "."
    return markdown_table(HEADER, table) + "\n\n" + "\n".join([*footer, where]) + "\n"


if __name__ == "__main__":
    run_main(main)
