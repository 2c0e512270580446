"""``vitpos/encodings`` stands alone: it imports torch and itself only, so the
folder can be lifted into another project."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import vitpos.encodings

PACKAGE = Path(vitpos.encodings.__file__).parent
ALLOWED = {"torch"} | set(sys.stdlib_module_names)  # third-party imports the folder may make

# Runs in a fresh interpreter on the copied folder: every registered encoding,
# built through the direct API, on a sequence and/or an image grid, with and
# without a class token; every hook on the training grid, then an attention.
SCRIPT = textwrap.dedent(
    """
    import math, sys
    from pathlib import Path

    import torch
    import torch.nn.functional as F

    import vitpos
    from vitpos.encodings import CrossModalRoPE, create_encoding, get_encoding_class, list_encodings
    from vitpos.encodings import functional as fn

    assert Path(vitpos.__file__).resolve().is_relative_to(Path.cwd().resolve()), vitpos.__file__
    assert not any(m.startswith("vitpos.") and not m.startswith("vitpos.encodings") for m in sys.modules), sorted(
        m for m in sys.modules if m.startswith("vitpos")
    )
    torch.manual_seed(0)
    B, D, H = 2, 32, 2
    grids = {1: (12,), 2: (3, 4)}
    built = []
    for name in list_encodings():
        for dims in get_encoding_class(name).grid_dims:
            options = {"parts": ["rope_1d", "alibi"]} if name == "combo" and dims == 1 else {}  # default parts: 2D
            for prefix in (0, 1):
                grid = grids[dims]
                pe = create_encoding(name, dim=D, num_heads=H, grid=grid, depth=2, num_prefix_tokens=prefix, **options)
                n, t = math.prod(grid), prefix + math.prod(grid)
                x = pe.add_to_tokens(torch.randn(B, n, D), grid)
                assert x.shape == (B, n, D), (name, x.shape)
                x = torch.cat([torch.zeros(B, prefix, D), x], 1)  # (B, P + N, D)
                q, k, v = torch.randn(3, B, H, t, D // H).unbind(0)  # (B, H, P + N, Dh) each
                rq, rk = pe.rotate_qk(q, k, grid, 0)
                # (B, H, P + N, Dh'): Dh' = Dh, or wider for an encoding written as extra q/k channels (pape)
                assert rq.shape[:-1] == q.shape[:-1] and rk.shape == rq.shape and rq.shape[-1] >= q.shape[-1], (
                    name,
                    rq.shape,
                    rk.shape,
                )
                bias = pe.attention_bias(grid, 0, q.device, q.dtype)
                assert bias is None or bias.shape == (H, t, t), (name, bias.shape)
                out = F.scaled_dot_product_attention(rq, rk, v, attn_mask=bias)  # (B, H, P + N, Dh)
                y = pe.after_block(x + out.transpose(1, 2).reshape(B, t, D), grid, 0)  # cpe acts after block 0
                assert y.shape == (B, t, D) and torch.isfinite(y).all(), (name, y.shape)
                built.append(f"{name}/{dims}d")
    rope = CrossModalRoPE(16)
    assert rope.key_rotation(fn.grid_coords(3, 4), 0.0).shape == (12, 8)
    print(" ".join(built))
    """
)


@pytest.mark.slow
def test_the_folder_alone_imports_builds_every_encoding_and_runs_every_hook(tmp_path):
    shutil.copytree(PACKAGE, tmp_path / "vitpos" / "encodings", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "vitpos" / "__init__.py").write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    env.update(PYTHONPATH=str(tmp_path), OMP_NUM_THREADS="1")
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    built = set(result.stdout.split())
    for name in vitpos.encodings.list_encodings():
        dims = vitpos.encodings.get_encoding_class(name).grid_dims
        assert {f"{name}/{d}d" for d in dims} <= built, name


def imports_of(path: Path) -> list[tuple[int, str, int]]:
    """(line, module, relative level) of every import in ``path``, module level and inside functions."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, node.module or "", node.level))
    return found


def test_no_file_under_encodings_imports_outside_it():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 5
    bad = []
    for path in files:
        depth = len(path.relative_to(PACKAGE).parts)  # 1 for a file directly in the package
        for line, module, level in imports_of(path):
            where = f"{path.relative_to(PACKAGE.parent.parent)}:{line}"
            if level:
                if level > depth:  # "from .. import x" climbs out of vitpos.encodings
                    bad.append(f"{where}: {'.' * level}{module}")
            elif module.split(".")[0] == "vitpos":
                if module != "vitpos.encodings" and not module.startswith("vitpos.encodings."):
                    bad.append(f"{where}: {module}")
            elif module.split(".")[0] not in ALLOWED:
                bad.append(f"{where}: {module} (a dependency besides torch)")
    assert not bad, "vitpos.encodings must import torch and itself only:\n" + "\n".join(bad)


def test_the_import_check_sees_imports_inside_functions(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import torch\n\n\ndef f():\n    from vitpos.validate import accepted_options\n    from .. import x\n"
    )
    # the import cycle this check exists for: base.create_encoding once imported vitpos.validate inside a function
    assert [(m, lvl) for _, m, lvl in imports_of(probe)] == [("torch", 0), ("vitpos.validate", 0), ("", 2)]
