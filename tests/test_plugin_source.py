"""A plug-in's identity covers its whole source: the defining module, the modules of its own package or
folder that it imports (directly or through one another), and the packages' ``__init__.py``; not the
files beside it that it does not import, and not torch or vitpos. One file alone keeps the hash it always
had. The digest of a loaded class and of its spec, found without importing, agree."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from vitpos.encodings import get_encoding_class
from vitpos.encodings.plugins import load_module, module_digest, source_digest
from vitpos.run.identity import plugin_source

ENCODING = """
from vitpos.encodings import PositionalEncoding, register
{imports}

@register
class Enc(PositionalEncoding):
    name = "{name}"
    strategies = ("interpolate",)
    grid_dims = (2,)

    def add_to_tokens(self, x, grid):
        return x * SCALE
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_single_file_keeps_its_own_hash(tmp_path):
    enc = write(tmp_path / "one.py", ENCODING.format(imports="SCALE = 1.0\nimport torch", name="src_one"))
    assert module_digest(str(enc)) == hashlib.sha256(enc.read_bytes()).hexdigest()[:12]


def test_editing_a_sibling_the_file_imports_changes_the_digest(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    enc = write(tmp_path / "two.py", ENCODING.format(imports="from src_helper import SCALE", name="src_two"))
    helper = write(tmp_path / "src_helper.py", "from src_deeper import BASE\nSCALE = BASE\n")
    deeper = write(tmp_path / "src_deeper.py", "BASE = 1.0\n")
    unrelated = write(tmp_path / "notes.py", "X = 1\n")
    before = module_digest(str(enc))
    load_module(str(enc))
    assert source_digest(get_encoding_class("src_two")) == before == plugin_source({"module": str(enc)})
    unrelated.write_text("X = 2\n")
    assert module_digest(str(enc)) == before, "a file the plug-in does not import is not its code"
    helper.write_text("from src_deeper import BASE\nSCALE = 2 * BASE\n")
    after_helper = module_digest(str(enc))
    deeper.write_text("BASE = 3.0\n")
    assert len({before, after_helper, module_digest(str(enc))}) == 3


def test_a_package_module_covers_its_package_imports_and_init(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    pkg = tmp_path / "src_pkg"
    write(pkg / "__init__.py", "")
    enc = write(pkg / "enc.py", ENCODING.format(imports="from .tables import SCALE", name="src_pkg_enc"))
    tables = write(pkg / "tables.py", "from . import consts\nSCALE = consts.K\n")
    consts = write(pkg / "consts.py", "K = 1.0\n")
    other = write(pkg / "other.py", "Y = 1\n")
    digests = [module_digest("src_pkg.enc")]
    assert "src_pkg" not in sys.modules, "finding the module ran its package"
    load_module("src_pkg.enc")
    assert source_digest(get_encoding_class("src_pkg_enc")) == digests[0]
    other.write_text("Y = 2\n")
    assert module_digest("src_pkg.enc") == digests[0]
    for path, text in ((tables, "from . import consts\nSCALE = 2 * consts.K\n"), (consts, "K = 2.0\n"),
                       (pkg / "__init__.py", "VERSION = 2\n"), (enc, enc.read_text() + "\n# edited\n")):  # fmt: skip
        path.write_text(text)
        digests.append(module_digest("src_pkg.enc"))
    assert len(set(digests)) == len(digests), digests


def test_a_module_that_cannot_be_found_has_no_digest(tmp_path):
    assert module_digest("src_no_such_pkg.enc") is None and module_digest(str(tmp_path / "nosuch.py")) is None
