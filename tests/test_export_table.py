"""The table of docs/export.md is what exporting every image encoding gives now: for each, the size
ranges of its ONNX and torch.export graphs, and at every size shown a difference from the eager
model within 1e-4 where the committed table has one. The latency columns depend on the machine
and are never compared (``python -m bench.export write=true`` rewrites the whole table)."""

from __future__ import annotations

import pytest

from bench.export import CHECKED, HEADER, PAGE, SHOWN, cells, committed_rows, export_row, image_encodings
from vitpos.export import TOLERANCE, Exported

COMMITTED = committed_rows(PAGE.read_text())


def test_the_table_lists_every_image_encoding_once():
    assert list(COMMITTED) == image_encodings()
    assert all(len(row) == len(HEADER) for row in COMMITTED.values())


def agrees(committed: str, fresh: str) -> bool:
    """Two ``ONNX / torch.export`` difference cells agree: the same sizes refused (``-``), and every
    difference within the tolerance on both sides (the digits depend on the machine's kernels)."""
    pairs = list(zip(committed.split(" / "), fresh.split(" / ")))
    return all((a == "-") == (b == "-") and (a == "-" or float(a) <= TOLERANCE >= float(b)) for a, b in pairs)


@pytest.mark.slow
@pytest.mark.parametrize("name", image_encodings())
def test_committed_row_is_what_exporting_gives(name):
    row = export_row(name, latency=False)
    fresh, committed = cells(row), COMMITTED[name]
    assert fresh[:4] == committed[:4], f"{name}: ranges differ; run python -m bench.export write=true"
    for column, size in zip(range(4, CHECKED), SHOWN):
        assert agrees(committed[column], fresh[column]), f"{name} at {size}: {committed[column]} vs {fresh[column]}"
    for graph in row.graphs.values():  # every graph that claims sizes agrees with eager there
        if isinstance(graph, Exported):
            assert max(graph.diffs.values()) <= TOLERANCE
