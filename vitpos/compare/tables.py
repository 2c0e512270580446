"""The Markdown-table helpers under their older import path: they live in :mod:`vitpos.tables`
(the lowest layer, so that training and ``vitpos.extrapolate`` use them without importing
``vitpos.compare``); this name stays for code written against it (the benchmarks)."""

from vitpos.tables import frame_to_markdown, markdown_table

__all__ = ["frame_to_markdown", "markdown_table"]
