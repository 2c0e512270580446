"""``python -m vitpos.export`` where its input or its output is wrong: an ``out=`` no file can be
made in (refused before the checkpoint is loaded), a write the disk refuses after the export, an
``out=`` that is a folder, a file that is no run's checkpoint. Each is one line, exit code 2, and
leaves nothing on disk. And the exported graph refuses an image size the patch does not divide, as
the eager model does.

The read-only and the full disk are real: a tmpfs (``mount``, root with CAP_SYS_ADMIN, as in
tests/test_disk_faults.py; skipped where the machine refuses it), remounted read-only or too small;
the file-size limit (``ulimit -f``) needs no privilege."""

from __future__ import annotations

import resource
from pathlib import Path

import numpy as np
import pytest
import timm
import torch
from ckpt_factory import IMAGE, make_checkpoint
from conftest import run_command
from test_disk_faults import mount, needs_mount, remount

from vitpos.errors import UserError
from vitpos.export.cli import check_writable, write
from vitpos.export.graph import TOLERANCE, Exported, check, geometry_of, ort_session
from vitpos.tasks.build import from_checkpoint

#: the tiny ViT of tests/test_export.py: 16x16 images, patch 4, width 32, 1 block
TINY = ["model.dim=32", "model.depth=1", "model.num_heads=2", "data.img_size=16"]


@pytest.fixture(scope="module")
def rope(tmp_path_factory):
    return make_checkpoint(tmp_path_factory.mktemp("ckpts") / "rope_2d", *IMAGE, *TINY, "encoding=rope_2d")


def one_line(ran, *needles: str) -> str:
    """Exit code 2 and one ``error:`` line on stderr holding every needle."""
    assert ran.code == 2, ran.out + ran.err
    assert ran.err.startswith("error: ") and ran.err.count("\n") == 1, ran.err
    for needle in needles:
        assert needle in ran.err, (needle, ran.err)
    return ran.err.strip()


def names(folder: Path) -> list[str]:
    """Every file and folder below ``folder``, relative to it."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# ------------------------------------------------------------------ out= where no file can be made
@needs_mount
def test_an_out_on_a_read_only_file_system_is_refused_before_the_checkpoint_is_loaded(rope, tmpfs):
    """A tmpfs remounted read-only: root cannot write there either (a mode of 0555 would not stop it)."""
    mount(tmpfs, "size=1m")
    remount(tmpfs, "ro")
    ran = run_command("vitpos.export", f"ckpt={rope}", f"out={tmpfs}/m.onnx", cwd=tmpfs.parent)
    line = one_line(ran, f"out={tmpfs}/m.onnx: no file can be created in {tmpfs} (read-only file system [EROFS]) "
                         "(pass out=<a folder you can write>/m.onnx)")  # fmt: skip
    assert "run.root" not in line and ran.out == ""
    assert names(tmpfs) == []


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_an_out_no_file_can_be_made_in_is_refused_before_the_checkpoint_is_loaded(rope, tmp_path):
    """The kernel refuses new files in /proc to every user, root included: the check meets a real
    refusal, before the minute of exporting, and names out=, not a temporary file."""
    ran = run_command("vitpos.export", f"ckpt={rope}", "out=/proc/vitpos/m.onnx", cwd=tmp_path)
    line = one_line(ran, "out=/proc/vitpos/m.onnx: no file can be created in /proc (",
                    "(pass out=<a folder you can write>/m.onnx)")  # fmt: skip
    assert ".tmp" not in line and "run.root" not in line
    assert ran.out == ""  # "exporting <ckpt> ..." is printed once the checkpoint is loaded
    assert names(tmp_path) == []


def test_a_folder_without_write_permission_is_refused_exactly_when_no_file_can_be_made(rope, tmp_path):
    """A folder of mode 0555: a user cannot create a file there, and the command is refused before
    loading anything; root can, and then the check lets it through (it tries a file, it does not
    read the permission bits; running as root, this test checks only that)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        try:
            (folder / "probe").touch()
            (folder / "probe").unlink()
            can_write = True
        except PermissionError:
            can_write = False
        if can_write:
            check_writable(folder / "m.onnx")  # no refusal of a place the file can be written
        else:
            ran = run_command("vitpos.export", f"ckpt={rope}", f"out={folder}/m.onnx", cwd=tmp_path)
            one_line(ran, f"out={folder}/m.onnx: no file can be created in {folder} (permission denied [EACCES])")
            assert ran.out == ""
        assert names(folder) == []
    finally:
        folder.chmod(0o755)


def test_an_out_below_a_file_is_refused_before_the_checkpoint_is_loaded(rope, tmp_path):
    (tmp_path / "notes.txt").write_text("not a folder\n")
    ran = run_command("vitpos.export", f"ckpt={rope}", f"out={tmp_path}/notes.txt/export/m.onnx", cwd=tmp_path)
    one_line(ran, f"{tmp_path}/notes.txt is a file, not a folder (pass a path in a folder, e.g. out={tmp_path}/m.onnx)")
    assert ran.out == "" and names(tmp_path) == ["notes.txt"]


# ------------------------------------------------------------------ a write refused after the export
def test_a_write_the_disk_refuses_after_the_export_is_one_line_naming_out(rope, tmp_path):
    """``ulimit -f``: the kernel refuses the write past the limit (EFBIG; Python ignores SIGXFSZ),
    set here in this process for the one command. The graph was exported and checked; the line names
    out= and the limit, and neither the partial file nor the folder made for it is left. Exported as
    torch_export: the write after the export is the same for both formats (``write``), and the ONNX
    conversion, which the refusal does not depend on, costs more than the rest of the command."""
    out = tmp_path / "export" / "m.pt2"
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 * 1024, hard))  # the program is larger: ~100 KB
    try:
        ran = run_command("vitpos.export", f"ckpt={rope}", "format=torch_export", f"out={out}", cwd=tmp_path)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    line = one_line(ran, f"out={out}: cannot be written after the export: file larger than the file-size limit "
                         "(ulimit -f) [EFBIG]; nothing written (raise it: ulimit -f unlimited, ")  # fmt: skip
    assert ".tmp" not in line and "run.root" not in line
    assert ran.out.startswith("exporting ") and "wrote" not in ran.out
    assert names(tmp_path) == []


@needs_mount
def test_a_full_disk_names_out_and_leaves_nothing(tmpfs):
    """A really full disk: a tmpfs of 64 KiB, and the graph's bytes (1 MiB here) written as the
    command writes them once the export is done (the command's path to this write is the ulimit
    test's above). The partial file and the folder made for it are gone."""
    mount(tmpfs, "size=64k")
    out = tmpfs / "export" / "m.onnx"
    with pytest.raises(UserError) as refused:
        write(Exported("onnx", "any size", b"\0" * 2**20, {}), out)
    assert str(refused.value) == (
        f"out={out}: cannot be written after the export: no space left on the device [ENOSPC]; nothing written "
        "(free space on that disk or pass out= on another one, then run the command again)"
    )
    assert names(tmpfs) == []


# ------------------------------------------------------------------ out= a folder
@pytest.mark.parametrize("fmt, folder, fix", [("onnx", "exp", "exp/model.onnx"),
                                              ("torch_export", "exp.pt2", "exp.pt2/model.pt2")])  # fmt: skip
def test_an_out_that_is_a_folder_is_called_a_folder(rope, tmp_path, fmt, folder, fix):
    (tmp_path / folder).mkdir()
    ran = run_command("vitpos.export", f"ckpt={rope}", f"format={fmt}", f"out={tmp_path / folder}", cwd=tmp_path)
    one_line(ran, f"out={tmp_path / folder}: is a folder (name the file, e.g. out={tmp_path / fix})")
    assert "name it" not in ran.err and ran.out == ""
    assert names(tmp_path) == [folder]


# ------------------------------------------------------------------ ckpt= no run's checkpoint
def test_a_truncated_checkpoint_is_one_line_with_a_fix(rope, tmp_path):
    cut = tmp_path / "last.ckpt"
    cut.write_bytes(rope.read_bytes()[: rope.stat().st_size // 2])
    ran = run_command("vitpos.export", f"ckpt={cut}", f"out={tmp_path / 'm.onnx'}", cwd=tmp_path)
    one_line(ran, f"ckpt={cut}: ", "truncated or corrupt", "pass a .ckpt written by")
    assert names(tmp_path) == ["last.ckpt"]


def test_a_timm_state_dict_is_refused_saying_what_ckpt_takes(tmp_path):
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=16, patch_size=4, depth=1,
                              embed_dim=32, num_heads=2, num_classes=4)  # fmt: skip
    weights = tmp_path / "vit.pth"
    torch.save(model.state_dict(), weights)
    ran = run_command("vitpos.export", f"ckpt={weights}", f"out={tmp_path / 'm.onnx'}", cwd=tmp_path)
    one_line(ran, f"ckpt={weights}: not a vitpos checkpoint", "a bare state_dict, such as timm's",
             "pass a .ckpt written by python train.py, e.g. <run folder>/checkpoints/last.ckpt")  # fmt: skip
    assert names(tmp_path) == ["vit.pth"]


# ------------------------------------------------------------------ sizes the patch does not divide
def test_the_onnx_graph_refuses_a_size_the_patch_does_not_divide(rope, tmp_path, capfd):
    """30x30 with patch 4: PyTorch refuses it; the graph refuses it too instead of running the 28x28
    crop its convolution's stride reaches. The tool's own check of that refusal prints nothing."""
    out = tmp_path / "m.onnx"
    ran = run_command("vitpos.export", f"ckpt={rope}", f"out={out}", cwd=tmp_path)
    assert ran.code == 0, ran.err
    assert "onnxruntime" not in capfd.readouterr().err  # no log line of the failed run at 17x17
    module, _, _ = from_checkpoint(rope)
    model = module.eval_model.eval()
    images = torch.randn(2, 3, 30, 30)
    with pytest.raises(ValueError, match="not a multiple of model.patch_size=4"), torch.no_grad():
        model(images)
    session = ort_session(out.read_bytes())
    with pytest.raises(Exception, match="cannot be reshaped"):  # noqa: PT011 (onnxruntime's own Fail)
        session.run(None, {"images": images.numpy()})
    crop = images[..., :28, :28]
    with torch.no_grad():
        assert np.abs(session.run(None, {"images": crop.numpy()})[0] - model(crop).numpy()).max() <= TOLERANCE


class Patches(torch.nn.Module):
    """A patch embedding alone: like an ONNX graph without shape guards, it runs at any size."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Conv2d(3, 4, 4, stride=4)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.embed(images).mean((-2, -1))


def test_the_check_refuses_a_graph_that_runs_where_the_patch_does_not_divide():
    model = Patches().eval()
    geo = geometry_of(model, (16, 16))

    def graph(images: torch.Tensor) -> np.ndarray:
        with torch.no_grad():
            return model(images).numpy()

    with pytest.raises(ValueError, match="at 17x17 the graph runs although the patch does not divide that size"):
        check(model, graph, geo, "any size")

    def guarded(images: torch.Tensor) -> np.ndarray:
        if images.shape[-2] % 4 or images.shape[-1] % 4:
            raise RuntimeError("cannot be reshaped")
        return graph(images)

    assert set(check(model, guarded, geo, "any size")) == {(16, 16), (16, 32), (8, 8)}
