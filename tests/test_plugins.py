"""An encoding of one's own: one file, from outside the repository, or an installed package.

The documented example (docs/examples/my_enc.py) is copied to a folder outside the repository
and trained for one batch through the documented option; an entry point is found through a
``*.dist-info/entry_points.txt`` put on ``sys.path`` here (nothing is installed); editing a
plug-in file makes a new run; the tools never load a plug-in from a checkpoint's path.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import ROOT, compose_train, finished_run, run_command
from test_bad_input import TINY

from vitpos.encodings import get_encoding_class, list_encodings
from vitpos.encodings.plugins import forget_entry_points
from vitpos.run.identity import run_dir

EXAMPLE = ROOT / "docs" / "examples" / "my_enc.py"


def plugin_file(folder: Path, name: str, scale: str = "1.0") -> Path:
    """The documented example, registered as ``name`` (each test its own: the registry is global)."""
    text = EXAMPLE.read_text().replace('name = "scaled_sincos"', f'name = "{name}"')
    path = folder / f"{name}.py"
    path.write_text(text.replace("torch.ones(())", f"torch.full((), {scale})"))
    return path


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory):
    """The documented example, copied to a folder outside the repository as ``plug_train``, and the
    run it trained for one batch through the documented option: (plug-in file, run folder). Trained
    once for the tests that read it (one training per run: the registry is global, a plug-in file is
    loaded once per process); a test that edits the file restores it."""
    root = tmp_path_factory.mktemp("plugin")
    (root / "elsewhere").mkdir()
    enc = plugin_file(root / "elsewhere", "plug_train")
    run = finished_run(root / "runs", *TINY, "encoding=plugin", f"encoding.module={enc}", "encoding.name=plug_train")
    return enc, run


def test_an_encoding_file_outside_the_repository_trains_through_the_documented_option(plugin_run, tmp_path):
    enc, run = plugin_run
    assert run.parent.name.startswith("plug_train-")
    assert "plug_train" not in list_encodings(2) and "plug_train" in list_encodings(2, plugins=True)
    ran = run_command(
        "vitpos.extrapolate", f"ckpt={run}/checkpoints/last.ckpt", "resolutions=[16]", f"out={tmp_path}/x"
    )
    assert ran.code == 0, ran.err  # loaded in this process already: the class is registered


@pytest.mark.slow
def test_a_tool_never_loads_a_plugin_from_a_checkpoint(tmp_path):
    """In a fresh process the class is not registered: the tool says which option loads it, in one line."""
    import subprocess

    (tmp_path / "p").mkdir()
    enc = plugin_file(tmp_path / "p", "plug_tool")
    run = finished_run(tmp_path / "runs", *TINY, "encoding=plugin", f"encoding.module={enc}", "encoding.name=plug_tool")
    ckpt = run / "checkpoints" / "last.ckpt"
    tool = [sys.executable, "-m", "vitpos.extrapolate", f"ckpt={ckpt}", "resolutions=[16]", f"out={tmp_path}/x"]
    refused = subprocess.run(tool, cwd=ROOT, capture_output=True, text=True, timeout=300)
    lines = [line for line in refused.stderr.splitlines() if "plug_tool" in line]
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr[-2000:]
    assert "plug-in encoding 'plug_tool', which is not loaded" in lines[0] and f"pass module={enc}" in lines[0]
    given = subprocess.run([*tool, f"module={enc}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert given.returncode == 0, given.stderr[-2000:]


def test_editing_a_plugin_file_makes_a_new_run(tmp_path):
    enc = plugin_file(tmp_path, "plug_edit")
    args = ("data=shapes", "model=vit_micro", "encoding=plugin", f"encoding.module={enc}", "encoding.name=plug_edit")
    before = run_dir(compose_train(*args))
    moved = tmp_path / "moved"
    moved.mkdir()
    same = moved / enc.name
    same.write_text(enc.read_text())
    assert run_dir(compose_train(*args[:3], f"encoding.module={same}", args[4])) == before  # its path is not its code
    enc.write_text(enc.read_text() + "\n# a changed line\n")
    assert run_dir(compose_train(*args)) != before


def test_an_entry_point_is_found_without_installing_anything(tmp_path, monkeypatch):
    package = tmp_path / "vitpos_plug_ep"
    package.mkdir()
    plugin_file(package, "plug_ep")
    (package / "__init__.py").write_text("")
    info = tmp_path / "vitpos_plug_ep-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vitpos-plug-ep\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vitpos.encodings]\nplug_ep = vitpos_plug_ep.plug_ep\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    forget_entry_points()
    try:
        cls = get_encoding_class("plug_ep")
    finally:
        forget_entry_points()
    assert cls.name == "plug_ep" and cls.__module__ == "vitpos_plug_ep.plug_ep"
    assert "plug_ep" not in list_encodings()  # never in the built-in list that sweeps and tests cover


def test_a_missing_plugin_file_is_refused_in_one_line(tmp_path):
    ran = run_command("train.py", *TINY, "encoding=plugin", f"encoding.module={tmp_path}/nope.py", "encoding.name=x")
    assert ran.code == 2 and ran.err.strip().startswith("error: encoding.module:"), ran.err
    assert "no such file" in ran.err and len(ran.err.strip().splitlines()) == 1
    ran = run_command("train.py", *TINY, "encoding=plugin")
    assert ran.code == 2 and "encoding=plugin encoding.module=<file.py or module> encoding.name=<name>" in ran.err


@pytest.mark.parametrize("name", ["rope_2d", "cpe"])
def test_built_in_encodings_are_found_without_an_import_list(name):
    init = (ROOT / "vitpos" / "encodings" / "__init__.py").read_text()
    assert f" {get_encoding_class(name).__module__.rsplit('.', 1)[1]}," not in init  # no list to edit


def test_a_plugin_edited_since_training_is_refused_by_every_tool_unless_allowed(plugin_run, tmp_path):
    """``extrapolate``, ``export`` and ``viz`` compare the digest of the code given with the one the checkpoint
    recorded: an edit (here, a scale that takes accuracy elsewhere) is one line naming both digests and the
    option to go on; ``allow_changed_code=true`` goes on."""
    from vitpos.encodings.plugins import module_digest

    enc, run = plugin_run
    trained = module_digest(str(enc))
    ckpt = f"ckpt={run}/checkpoints/last.ckpt"
    original = enc.read_text()
    plugin_file(enc.parent, "plug_train", scale="3.0")  # the same file, edited
    try:
        edited = module_digest(str(enc))
        assert edited != trained
        tools = (("vitpos.extrapolate", "resolutions=[16]", f"out={tmp_path}/x"),
                 ("vitpos.export", f"out={tmp_path}/m.onnx"), ("vitpos.viz", f"out={tmp_path}/v"))  # fmt: skip
        for tool, *args in tools:
            ran = run_command(tool, ckpt, f"module={enc}", *args)
            lines = [line for line in ran.err.splitlines() if "plug_train" in line]
            assert ran.code == 2 and len(lines) == 1 and "Traceback" not in ran.err, (tool, ran.out, ran.err)
            assert f"source digest {trained}, module={enc} has {edited} now" in lines[0], lines[0]
            assert "allow_changed_code=true" in lines[0]
        ran = run_command("vitpos.extrapolate", ckpt, f"module={enc}", "allow_changed_code=true", "resolutions=[16]",
                          f"out={tmp_path}/x")  # fmt: skip
        assert ran.code == 0, ran.err
    finally:
        enc.write_text(original)  # the run's own code again, for the other tests of this run
