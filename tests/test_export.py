"""``python -m vitpos.export``: a checkpoint to ONNX or torch.export with dynamic sizes, checked
against the eager model; the rewrites of the operations ONNX lacks; bad input writes nothing.

The table of every encoding (docs/export.md) is tests/test_export_table.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from ckpt_factory import IMAGE, SEQUENCE, make_checkpoint, make_evil_checkpoint
from conftest import run_command

from bench.export import TINY as TINY_MODEL
from bench.export import tiny_model
from vitpos.export.cli import report
from vitpos.export.graph import (
    TOLERANCE,
    Exported,
    Geometry,
    export_model,
    geometry_of,
    ort_session,
    runner,
    to_onnx,
    trace,
)
from vitpos.export.onnx_ops import (
    REWRITES,
    matrix_exp,
    onnx_decompositions,
    rewrite_for_onnx,
    solve,
    solve_ex,
    uses_rewritten_ops,
)
from vitpos.models import VisionTransformer
from vitpos.tasks.build import from_checkpoint

#: one block: the checks compare the graph with eager, and a second block only doubles the export
TINY = ["model.dim=32", "model.depth=1", "model.num_heads=2", "data.img_size=16"]


def skew(*shape: int, seed: int = 0) -> torch.Tensor:
    u = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return u - u.transpose(-1, -2)


def test_solve_matches_linalg_solve_on_cayley_matrices():
    """STRING-Cayley solves (I + S) X = I - S, S skew-symmetric: no pivot is needed there."""
    s, eye = skew(3, 2, 16, 16), torch.eye(16)
    expected = torch.linalg.solve(eye + s, eye - s)
    assert torch.allclose(solve(eye + s, eye - s), expected, atol=1e-5)
    x, _, _, info = solve_ex(eye + s, eye - s, left=False)  # X (I + S) = I - S
    assert torch.allclose(x, torch.linalg.solve(eye + s, eye - s, left=False), atol=1e-5)
    assert not info.any()


@pytest.mark.parametrize("scale", [0.0, 0.01, 1.0, 30.0])
def test_matrix_exp_matches_aten_in_float32(scale):
    """Within what float32 allows: the error against float64 is of the order of ATen's own."""
    a = skew(2, 3, 8, 8, seed=1) * scale
    exact = torch.linalg.matrix_exp(a.double())
    ours = (matrix_exp(a).double() - exact).abs().max().item()
    aten = (torch.linalg.matrix_exp(a).double() - exact).abs().max().item()
    assert ours <= max(4 * aten, 1e-6), (ours, aten)


def test_matrix_exp_squares_each_matrix_as_often_as_its_own_norm_asks():
    """One batch mixing 1-norms from 0 to ~1e3 (0 to 11 squarings): every matrix agrees with ATen's
    on its own, so no matrix is squared by another's count (the squarings are masked per matrix)."""
    scales = torch.tensor([0.0, 0.01, 1.0, 30.0, 300.0, 3.0]).reshape(2, 3, 1, 1)  # (2, 3) matrices, each its scale
    a = skew(2, 3, 8, 8, seed=2) * scales
    exact = torch.linalg.matrix_exp(a.double())
    ours = (matrix_exp(a).double() - exact).abs().amax((-2, -1))  # (2, 3): each matrix's largest error
    aten = (torch.linalg.matrix_exp(a).double() - exact).abs().amax((-2, -1))
    assert (ours <= (4 * aten).clamp(min=1e-6)).all(), (ours, aten)


@pytest.mark.parametrize("name", ["lookhere", "string_cayley", "comrope", "rope_2d"])
def test_the_rewrite_pass_runs_where_an_op_onnx_lacks_is_called_and_only_there(name):
    """Every program that calls hypot, a solve or exp(A) comes out of the rewrite without them; one
    that calls none is handed on as it is (the same object: no second trace). One encoding per
    rewritten operation (lookhere: hypot, string_cayley: a solve, comrope: exp(A), as liere's is)
    and one without any; one block, as a second only repeats the same calls. Every encoding's
    export, the rewrite included, is tests/test_export_table.py's slow test."""
    model = VisionTransformer({"name": name}, **{**TINY_MODEL, "depth": 1}).eval()
    program = trace(model, geometry_of(model, (16, 16)), "fixed size")
    rewritten = rewrite_for_onnx(program)
    assert uses_rewritten_ops(program) == (name != "rope_2d")
    assert not uses_rewritten_ops(rewritten)
    assert (rewritten is program) == (name == "rope_2d")
    assert set(REWRITES) <= set(onnx_decompositions())  # the table torch.export users get


class OfGrid(torch.nn.Module):
    """``table(grid)`` of the patch grid of the input images (patch 4): a table an encoding derives
    from the grid, exported on its own."""

    def __init__(self, table):
        super().__init__()
        self.table = table

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.table((images.shape[-2] // 4, images.shape[-1] // 4))


def export_of_grid(table) -> torch.nn.Module:
    """``OfGrid(table)`` traced as the tool traces a model for any size (multiples of 4, from 8), as a module."""
    return trace(OfGrid(table), Geometry(3, (4, 4), (16, 16)), "any size").module()


def rotations(pos):
    return lambda grid: torch.view_as_real(pos.rotation(grid, 0, torch.device("cpu")))  # (N, Dh/2, 2)


@pytest.mark.parametrize("strategy", ["ntk", "dynamic", "yarn"])
def test_size_scaled_rope_traces_its_formula_for_every_size(strategy):
    """NTK, dynamic NTK and YaRN scale by s = max(1, new / trained side): traced with a symbolic
    side, the graph computes s, so at a wider grid its rotations are the eager ones of that grid
    (scaled: unlike plain RoPE's), and at a smaller grid plain RoPE's. The logits of the export
    table hardly see this (an untrained model); the rotations do."""
    pos, plain = tiny_model("rope_2d", strategy).pos, tiny_model("rope_2d", "extrapolate").pos
    exported = export_of_grid(rotations(pos))
    for size, scaled in [((16, 16), False), ((16, 32), True), ((8, 8), False), ((40, 24), True)]:
        grid = (size[0] // 4, size[1] // 4)
        got, eager, unscaled = exported(torch.zeros(1, 3, *size)), rotations(pos)(grid), rotations(plain)(grid)
        assert torch.allclose(got, eager, atol=1e-6), f"{strategy} at {size}"
        assert (got - unscaled).abs().max() > 1e-3 if scaled else torch.allclose(got, unscaled, atol=1e-6)


@pytest.mark.parametrize("name", ["learned_1d", "learned_2d"])
def test_a_table_resize_antialiases_in_the_graph_exactly_where_eager_does(name):
    """``antialias=shrink`` antialiases only when the grid shrinks along some axis: under export the
    choice is a tensor (``symbolic_sizes.shrinks``) and the graph computes both resizes, so every size
    takes the eager table: plain bicubic when enlarging (unlike ``antialias=always``'s kernel), the
    antialiased one when shrinking (equal to ``always``'s)."""
    pos = tiny_model(name).pos
    with torch.no_grad():  # a rough table, so that the two kernels differ clearly
        for p in pos.parameters():
            p.normal_()
    always = tiny_model(name).pos
    always.load_state_dict(pos.state_dict())
    always.antialias = "always"
    exported = export_of_grid(pos.table_for)
    for size, shrink in [((16, 16), False), ((16, 32), False), ((40, 24), False), ((8, 8), True), ((8, 32), True)]:
        grid = (size[0] // 4, size[1] // 4)
        with torch.no_grad():
            got, eager, antialiased = exported(torch.zeros(1, 3, *size)), pos.table_for(grid), always.table_for(grid)
        assert torch.allclose(got, eager, atol=1e-5), f"{name} at {size}"
        if size != (16, 16):
            assert torch.allclose(got, antialiased, atol=1e-5) == shrink, f"{name} at {size}"


class BranchOnWidth(torch.nn.Module):
    """A patch embedding whose output moves by 1e-6 on images wider than 16 pixels: a Python branch
    on the size, as invisible in the outputs as a position encoding in an untrained model's logits."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Conv2d(3, 4, 4, stride=4)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        out = self.embed(images).mean((-2, -1))
        return out + 1e-6 if images.shape[-1] > 16 else out


def test_an_onnx_graph_never_takes_a_size_its_trace_refuses():
    """The ONNX conversion drops the trace's guards: the graph of a Python branch runs the branch that
    was traced at every size and agrees with the eager model within the tolerance all the same.
    The trace's own check refuses the other sizes, so the ONNX graph is fixed-size too."""
    model = BranchOnWidth().eval()
    geo = geometry_of(model, (16, 16))
    onnx_alone = runner("onnx", to_onnx(trace(model, geo, "any size")))
    wide = geo.example(size=(16, 32))
    with torch.no_grad():
        assert np.abs(onnx_alone(wide) - model(wide).numpy()).max() <= TOLERANCE  # the wrong branch, unseen
    exported = export_model(model, geo, "onnx")
    assert exported.scope == "fixed size"
    assert "Guard failed" in exported.reasons[0], exported.reasons


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpts")
    return {
        "rope_2d": make_checkpoint(root / "rope_2d", *IMAGE, *TINY, "encoding=rope_2d"),
        "learned_1d": make_checkpoint(root / "learned_1d", *IMAGE, *TINY, "encoding=learned_1d"),
        "sequence": make_checkpoint(root / "sequence", *SEQUENCE),
    }


def eager_logits(ckpt, images: torch.Tensor) -> np.ndarray:
    module, _, _ = from_checkpoint(ckpt)
    with torch.no_grad():
        return module.eval_model.eval()(images).numpy()


def test_onnx_export_has_dynamic_sizes_and_agrees_with_eager(checkpoints, tmp_path):
    out = tmp_path / "out" / "rope.onnx"
    ran = run_command("vitpos.export", f"ckpt={checkpoints['rope_2d']}", f"out={out}")
    assert ran.code == 0, ran.err
    assert "dynamic batch; any height and width that are multiples of 4x4, from 8x8" in ran.out
    assert "why not" not in ran.out  # no broader range was refused
    session = ort_session(out.read_bytes())
    for shape in [(1, 3, 16, 16), (3, 3, 16, 32), (2, 3, 24, 8)]:  # sizes and a batch it was not traced at
        images = torch.randn(*shape)
        got = session.run(None, {"images": images.numpy()})[0]
        assert np.abs(got - eager_logits(checkpoints["rope_2d"], images)).max() <= TOLERANCE
    assert sorted(p.name for p in out.parent.iterdir()) == ["rope.onnx"]  # no temporary file left


def test_torch_export_takes_a_learned_table_at_any_size(checkpoints, tmp_path):
    """learned_1d's table resize antialiases only when the grid shrinks: its program takes every size,
    smaller ones included, and agrees with eager there."""
    out = tmp_path / "l1.pt2"
    ran = run_command("vitpos.export", f"ckpt={checkpoints['learned_1d']}", "format=torch_export", f"out={out}")
    assert ran.code == 0, ran.err
    assert "any height and width that are multiples of 4x4, from 8x8" in ran.out
    program = torch.export.load(out)
    for shape in [(2, 3, 16, 32), (1, 3, 8, 12)]:  # enlarged (plain bicubic), shrunk (antialiased)
        images = torch.randn(*shape)
        got = program.module()(images).detach().numpy()
        assert np.abs(got - eager_logits(checkpoints["learned_1d"], images)).max() <= TOLERANCE


def test_the_tool_says_why_a_broader_range_was_refused(checkpoints, tmp_path):
    """``strategy=error`` refuses every grid but the training one: the graph is fixed-size, and the
    tool prints why each broader range failed."""
    out = tmp_path / "l1.pt2"
    args = [f"ckpt={checkpoints['learned_1d']}", "format=torch_export", "strategy=error", f"out={out}"]
    ran = run_command("vitpos.export", *args)
    assert ran.code == 0, ran.err
    assert "the training size 16x16 only (fixed size)" in ran.out
    assert ran.out.count("why not") == 2 and "trained on the grid (4, 4)" in ran.out, ran.out
    images = torch.randn(3, 3, 16, 16)
    got = torch.export.load(out).module()(images).detach().numpy()
    assert np.abs(got - eager_logits(checkpoints["learned_1d"], images)).max() <= TOLERANCE


def test_the_report_names_the_range_from_the_training_size_up():
    geo = Geometry(3, (4, 4), (16, 16))
    result = Exported("onnx", "from the training size up", b"", {(16, 16): 0.0, (32, 32): 1e-8}, ["any size: x"])
    lines = report(result, Path("m.onnx"), geo)
    assert (
        lines[0]
        == "wrote m.onnx: dynamic batch; heights and widths that are multiples of 4x4, from the training size 16x16 up"
    )
    assert lines[1] == "  why not any size: x"
    assert lines[2].endswith("0 at 16x16, 1e-08 at 32x32")


BAD = {
    "sequence": (["ckpt={sequence}"], "is a sequence-task checkpoint"),
    "unknown option": (["ckpt={rope_2d}", "opset=18"], "opset: unknown option"),
    "not a checkpoint": (["ckpt={text}"], "not a checkpoint"),
    "other format's name": (["ckpt={rope_2d}", "out={tmp}/model.pt2"], "pass format=torch_export"),
    "unknown strategy": (["ckpt={rope_2d}", "strategy=bicubic"], "strategy=bicubic: not a strategy"),
    "unknown format": (["ckpt={rope_2d}", "format=tflite"], "format: unknown tflite"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_and_writes_nothing(case, checkpoints, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a checkpoint\n")
    argv, message = BAD[case]
    names = {**{k: str(v) for k, v in checkpoints.items()}, "text": str(text), "tmp": str(tmp_path)}
    ran = run_command("vitpos.export", *(a.format(**names) for a in argv), cwd=tmp_path)
    assert ran.code == 2, (ran.out, ran.err)
    assert ran.err.startswith("error: ") and ran.err.count("\n") == 1 and message in ran.err, ran.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # no model.onnx, no folder


def test_a_checkpoint_that_would_run_code_is_refused(tmp_path):
    """Loaded with weights_only=True, as by every tool: the crafted pickle never runs."""
    marker = tmp_path / "pwned"
    ckpt = make_evil_checkpoint(tmp_path / "evil", marker)
    ran = run_command("vitpos.export", f"ckpt={ckpt}", f"out={tmp_path / 'out' / 'm.onnx'}", cwd=tmp_path)
    assert ran.code == 2 and "refused" in ran.err and ran.err.count("\n") == 1, ran.err
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_help_says_what_it_does_with_examples(tmp_path):
    ran = run_command("vitpos.export", "--help", cwd=tmp_path)
    assert ran.code == 0
    assert ran.out.startswith("usage: python -m vitpos.export ckpt=PATH")
    assert "Examples:\n  python -m vitpos.export ckpt=" in ran.out
    assert list(tmp_path.iterdir()) == []
