"""Reliability, round six: plug-ins, the run folder's options, the report tools. Each case is run as a
user runs it (``train.py``'s and the tools' ``main(argv)`` in process) and checked for its exit code, its
one line and what it leaves on disk; where working is the right answer, that it works.

- training: ``run.root=''`` or a file, ``trainer.precision=8``, ``trainer.devices=0``;
- plug-ins: an import error inside one, a hook that drops a token or raises ``IndexError``,
  ``strategies = ()``, a registered class that is not an encoding, a mistyped name, a missing file
  (its fix said once), a broken installed entry point beside a good one;
- compare: ``multirun=<no such folder>``, a binary ``hparams.yaml``;
- a copied run folder's lock, and the ``next:`` commands on a path with a space.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from conftest import run_command
from test_bad_input import TINY
from test_compare import write_run

from vitpos.encodings import get_encoding_class
from vitpos.encodings.plugins import forget_entry_points

PLUGIN = """
import torch
from vitpos.encodings import PositionalEncoding, register
{top}

@register
class Enc(PositionalEncoding):
    name = "{name}"
    strategies = {strategies}
    grid_dims = (2,)

    def add_to_tokens(self, x, grid):
        {body}
"""


def plugin(folder: Path, name: str, top: str = "", body: str = "return x", strategies: str = '("interpolate",)'):
    """A plug-in file registering ``name`` (each case its own: the registry is global)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(PLUGIN.format(name=name, top=top, body=body, strategies=strategies))
    return path


def one_error(ran, *needles: str) -> str:
    """Exit code 2, no traceback, exactly one ``error:`` line, holding every needle."""
    out = ran.out + ran.err
    assert ran.code == 2 and "Traceback" not in out, out
    errors = [line for line in ran.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, out
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def refused_training(tmp_path: Path, *args: str) -> str:
    """The one error line of ``python train.py TINY ARGS`` run in ``tmp_path``, which stays empty."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    ran = run_command("train.py", *TINY, f"run.root={tmp_path / 'runs'}", *args, cwd=work)
    line = one_error(ran)
    assert not any(work.iterdir()) and not (tmp_path / "runs").exists(), "a refused run wrote something"
    return line


# ------------------------------------------------------------------ training options
@pytest.mark.parametrize(
    "args, message",
    [
        (["run.root="], "error: run.root: empty: the runs would land in the current folder (give the folder"),
        (["run.root={file}"], "error: run.root: {file} is a file, not a folder"),
        (["run.root={file}/below"], "error: run.root: {file}/below lies inside the file {file}, not a folder"),
        (["trainer.precision=8"], "error: trainer.precision: 8 is not a precision (valid: auto, 64, 32, 16, "),
        (["trainer.devices=0"], "error: trainer.devices: 0 is not a device count or list (valid: auto, a count"),
        (["+model.bogus=1"], "error: model.bogus: not an option of the model (VisionTransformer) (leave +model.bogus"),
    ],
    ids=["root-empty", "root-file", "root-below-file", "precision-8", "devices-0", "model-key"],
)
def test_training_options_lightning_or_the_disk_would_refuse_late(tmp_path, args, message):
    file = tmp_path / "afile"
    file.write_text("not a folder")
    line = refused_training(tmp_path, *(a.format(file=file) for a in args))
    assert line.startswith(message.format(file=file)), line
    assert file.read_text() == "not a folder"


# ------------------------------------------------------------------ plug-ins
def test_an_import_error_inside_a_plugin_is_its_own_not_a_wrong_name(tmp_path):
    enc = plugin(tmp_path / "p", "r6_imports", top="import r6_no_such_dependency")
    line = refused_training(tmp_path, "encoding=plugin", f"encoding.module={enc}", "encoding.name=r6_imports")
    assert f"encoding.module: {enc} failed to import: ModuleNotFoundError: No module named" in line, line
    assert "no such file" not in line


def test_a_missing_plugin_file_gets_its_fix_once(tmp_path):
    line = refused_training(tmp_path, "encoding=plugin", f"encoding.module={tmp_path}/nope.py", "encoding.name=x")
    assert line == (f"error: encoding.module: {tmp_path}/nope.py: no such file "
                    "(give a .py file or an importable module name)"), line  # fmt: skip


@pytest.mark.parametrize(
    "name, kwargs, needle",
    [
        ("r6_drops", {"body": "return x[:, 1:]"}, "add_to_tokens returned (1, 63, 64) where (1, 64, 64) was expected"),
        ("r6_index", {"body": "return x[:, [99]]"}, "failed on the training grid: IndexError: "),
        ("r6_nostrategy", {"strategies": "()"}, "Enc.strategies must be a non-empty tuple, got ()"),
        ("r6_nan", {"body": "return x + float('nan')"}, "add_to_tokens returned nan or inf before any training step"),
    ],
    ids=["drops-a-token", "hook-index-error", "no-strategy", "nan-before-any-step"],
)
def test_a_plugin_the_check_must_catch_is_one_line(tmp_path, name, kwargs, needle):
    enc = plugin(tmp_path / "p", name, **kwargs)
    line = refused_training(tmp_path, "encoding=plugin", f"encoding.module={enc}", f"encoding.name={name}")
    assert needle in line and line.startswith("error: encoding"), line


def test_a_registered_class_that_is_not_an_encoding_is_one_line(tmp_path):
    enc = tmp_path / "p" / "r6_notenc.py"
    enc.parent.mkdir()
    enc.write_text("from vitpos.encodings import register\n\n@register\nclass NotEnc:\n    name = 'r6_notenc'\n")
    line = refused_training(tmp_path, "encoding=plugin", f"encoding.module={enc}", "encoding.name=r6_notenc")
    assert "is not a subclass of PositionalEncoding (subclass it)" in line, line


def test_a_mistyped_plugin_name_lists_the_loaded_plugins(tmp_path):
    enc = plugin(tmp_path / "p", "r6_listed")
    line = refused_training(tmp_path, "encoding=plugin", f"encoding.module={enc}", "encoding.name=r6_listd")
    assert "unknown encoding 'r6_listd'" in line and "plug-ins: " in line and "r6_listed" in line, line


def test_a_broken_entry_point_is_skipped_with_one_warning_and_the_others_load(tmp_path, monkeypatch, capsys):
    """Three installed plug-ins: one whose module is missing, one that raises at import, one that works."""
    package = tmp_path / "r6_ep"
    package.mkdir()
    (package / "__init__.py").write_text("")
    plugin(package, "r6_ep_good")
    (package / "boom.py").write_text("raise RuntimeError('broken at import')\n")
    info = tmp_path / "r6_ep-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: r6-ep\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[vitpos.encodings]\nmissing = r6_ep.nosuch\nboom = r6_ep.boom\ngood = r6_ep.r6_ep_good\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    forget_entry_points()
    try:
        assert get_encoding_class("r6_ep_good").name == "r6_ep_good"
        with pytest.raises(KeyError, match="unknown encoding 'rope_2dd'"):  # a typo of a built-in: its list
            get_encoding_class("rope_2dd")
    finally:
        forget_entry_points()
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 2, warnings
    assert "plug-in missing (r6_ep.nosuch" in warnings[0] and "ModuleNotFoundError" in warnings[0]
    assert "plug-in boom (r6_ep.boom" in warnings[1] and "RuntimeError: broken at import" in warnings[1]


# ------------------------------------------------------------------ compare
def test_compare_refuses_a_multirun_folder_that_does_not_exist(tmp_path):
    write_run(tmp_path / "runs" / "shapes" / "none" / "seed0", [0.5], {"test/acc": 0.5}, 1)
    ran = run_command("vitpos.compare", f"runs={tmp_path / 'runs'}", f"multirun=[{tmp_path / 'nosuch'}]")
    one_error(ran, f"multirun={tmp_path / 'nosuch'}: no such folder", "leave multirun= out")
    assert not (tmp_path / "runs" / "report").exists()


def test_compare_reads_a_run_whose_hparams_are_binary_bytes(tmp_path):
    run = tmp_path / "runs" / "shapes" / "none" / "seed0"
    write_run(run, [0.5], {"test/acc": 0.5}, 1)
    (run / "hparams.yaml").write_bytes(b"\xff\xfe\x00\x81binary")
    ran = run_command("vitpos.compare", f"runs={tmp_path / 'runs'}", f"out={tmp_path / 'report'}")
    assert ran.code == 0 and "Traceback" not in ran.err, ran.err
    assert "none" in (tmp_path / "report" / "report.md").read_text()


# ------------------------------------------------------------------ run folders and the console
def test_a_copied_lock_names_its_file_and_when_to_remove_it(tmp_path):
    from vitpos.errors import UserError
    from vitpos.run.folder import LOCK, acquire

    (tmp_path / LOCK).write_text(json.dumps({"pid": 4242, "host": "otherhost", "command": "train.py"}) + "\n")
    with pytest.raises(UserError) as refused:
        acquire(tmp_path)
    line = str(refused.value)
    assert "in use by process 4242 on otherhost" in line and "remove" in line and str(tmp_path / LOCK) in line, line
    assert "once process 4242 there has ended" in line


def test_the_next_commands_paste_as_one_word_per_option_on_a_path_with_a_space():
    from vitpos.run.identity import next_commands

    folder = Path("/tmp/my runs/shapes/vit_micro/none-abcdef/seed0")
    lines = next_commands(folder, "classification", module="my enc.py").splitlines()[1:]
    words = [shlex.split(line) for line in lines]
    assert words[0] == ["tensorboard", "--logdir", "/tmp/my runs"]
    assert words[1] == ["python", "-m", "vitpos.compare", "runs=/tmp/my runs/shapes", "out=/tmp/my runs/shapes/report"]
    assert f"ckpt={folder}/checkpoints/last.ckpt" in words[2] and "module=my enc.py" in words[2]
    assert f"out={folder}/viz" in words[3]


def test_compare_refuses_an_out_on_a_read_only_disk_before_reading(tmpfs, tmp_path):
    """A read-only disk (a tmpfs mounted ``ro``: ``chmod`` would not stop root)."""
    import subprocess

    from test_benchmark_plan import mount_refusal

    why = mount_refusal()
    if why is not None:
        pytest.skip(f"needs `mount -t tmpfs` for a read-only disk; refused here: {why}")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(tmpfs)], check=True)
    write_run(tmp_path / "runs" / "shapes" / "none" / "seed0", [0.5], {"test/acc": 0.5}, 1)
    ran = run_command("vitpos.compare", f"runs={tmp_path / 'runs'}", f"out={tmpfs / 'report'}")
    one_error(ran, f"out={tmpfs / 'report'}: {tmpfs} is not writable (Read-only file system)")
