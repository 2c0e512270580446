"""The table of docs/export.md is what exporting every image encoding gives now, with each of its
strategies (bench/export.py's ``table_keys``): for each, the size
ranges of its ONNX and torch.export graphs, and at every size shown a difference from the eager
model within 1e-4 where the committed table has one. The table holds nothing machine-timed: the
latencies that ``python -m bench.export write=true`` measures beside it go to
docs/results/export_latency.csv, which no test reads."""

from __future__ import annotations

import pytest

from bench.export import CHECKED, HEADER, PAGE, SHOWN, cells, committed_rows, export_row, image_encodings, table_keys
from vitpos.export import TOLERANCE, Exported

COMMITTED = committed_rows(PAGE.read_text())
KEYS = table_keys(image_encodings())


def test_every_row_is_a_registered_encoding_and_strategy_once_in_the_generators_order():
    """The table holds rows of registered encodings only, each (encoding, strategy) once, in the order the
    generator writes them. An encoding without rows is not an error: its rows appear when the generator runs
    for it (``python -m bench.export write=true encodings=[NAME]``); the slow test exports it all the same."""
    assert set(COMMITTED) <= set(KEYS)
    assert list(COMMITTED) == [key for key in KEYS if key in COMMITTED]
    assert len(COMMITTED) > len({name for name, _ in COMMITTED})  # more strategies than the defaults
    assert all(len(row) == len(HEADER) for row in COMMITTED.values())


def test_the_table_holds_what_the_export_decides_and_nothing_timed():
    """Every column is one the export decides and the slow test below recomputes: no latency (a
    machine's number) sits in the compared table."""
    assert CHECKED == len(HEADER)
    assert not any("ms" in column.split() or "/" in column for column in HEADER), HEADER


def test_no_onnx_graph_claims_sizes_its_trace_refuses():
    """The ONNX graph comes from the torch.export trace, without its guards: its range is never
    broader than the program's (vitpos/export/graph.py; tests/test_export.py shows why on a model
    with a Python branch on the size)."""
    order = ["any", "≥ 16x16", "16x16 only", "fails"]
    for key, row in COMMITTED.items():
        assert order.index(row[2]) >= order.index(row[3]), f"{key}: ONNX {row[2]}, torch.export {row[3]}"


def test_every_rope_scaling_exports_at_any_size():
    """NTK, dynamic NTK and YaRN scale by the size ratio as tensor arithmetic under export
    (``symbolic_sizes.size_ratio``), not by a Python branch on the size."""
    rows = {key: row[2:4] for key, row in COMMITTED.items() if key[1] in ("ntk", "dynamic", "yarn")}
    assert len(rows) >= 6, rows
    assert all(ranges == ["any", "any"] for ranges in rows.values()), rows


def test_every_interpolation_exports_at_any_size():
    """Rescaling positions to the training grid is arithmetic on the size, not a Python decision, and
    so is the choice of ``learned_1d``'s and ``learned_2d``'s table resize to antialias (only when the
    grid shrinks): every ``interpolate`` exports with any size."""
    rows = {name: row[2:4] for (name, strategy), row in COMMITTED.items() if strategy == "interpolate"}
    assert len(rows) >= 12 and {"learned_1d", "learned_2d", "rope_2d"} <= set(rows), rows
    assert all(ranges == ["any", "any"] for ranges in rows.values()), rows


def agrees(committed: str, fresh: str) -> bool:
    """Two ``ONNX / torch.export`` difference cells agree: the same sizes refused (``-``), and every
    difference within the tolerance on both sides (the digits depend on the machine's kernels)."""
    pairs = list(zip(committed.split(" / "), fresh.split(" / ")))
    return all((a == "-") == (b == "-") and (a == "-" or float(a) <= TOLERANCE >= float(b)) for a, b in pairs)


@pytest.mark.slow
@pytest.mark.parametrize("name, strategy", KEYS, ids=[f"{n}-{s}" for n, s in KEYS])
def test_committed_row_is_what_exporting_gives(name, strategy):
    row = export_row(name, strategy, latency=False)
    fresh, committed = cells(row), COMMITTED.get((name, strategy))
    if committed is not None:  # a row written by the generator: the export still gives it
        assert fresh[:4] == committed[:4], f"{name}: ranges differ; run python -m bench.export write=true"
        for column, size in zip(range(4, CHECKED), SHOWN):
            assert agrees(committed[column], fresh[column]), f"{name} at {size}: {committed[column]} vs {fresh[column]}"
    for graph in row.graphs.values():  # every graph that claims sizes agrees with eager there
        if isinstance(graph, Exported):
            assert max(graph.diffs.values()) <= TOLERANCE
