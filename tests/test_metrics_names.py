"""The names of the scores beyond the training size have one owner, vitpos/metrics.py: what
``metric_name`` writes, ``parse_metric`` reads back, and no other module parses them with a
regular expression of its own."""

import ast
from pathlib import Path

import pytest

from vitpos.metrics import BeyondSize, metric_name, parse_metric

ROOT = Path(__file__).resolve().parents[1]
OWNER = "vitpos/metrics.py"

# (metric_name's arguments, the name, what parse_metric reads in it)
CASES = [
    (("res", 48), "test/acc@res48", BeyondSize("acc", "res", "48", False, None)),
    (("res", (16, 32)), "test/acc@res16x32", BeyondSize("acc", "res", "16x32", False, None)),
    (("res", [32, 16]), "test/acc@res32x16", BeyondSize("acc", "res", "32x16", False, None)),
    (("res", (24, 24)), "test/acc@res24", BeyondSize("acc", "res", "24", False, None)),
    (("res", 48, None, None, "upsampled"), "test/acc@res48up", BeyondSize("acc", "res", "48", True, None)),
    (("res", (16, 64), "ntk", "extrapolate", "upsampled"), "test/acc@res16x64up/ntk",
     BeyondSize("acc", "res", "16x64", True, "ntk")),
    (("res", 32, "interpolate", "extrapolate", "downsampled"), "test/acc@res32/interpolate",
     BeyondSize("acc", "res", "32", False, "interpolate")),
    (("len", 256), "test/acc@len256", BeyondSize("acc", "len", "256", False, None)),
    (("len", 128, "yarn", "extrapolate"), "test/acc@len128/yarn", BeyondSize("acc", "len", "128", False, "yarn")),
    (("len", 128, "extrapolate", "extrapolate"), "test/acc@len128", BeyondSize("acc", "len", "128", False, None)),
    (("len", 64, "interpolate+error", "default"), "test/acc@len64/interpolate+error",
     BeyondSize("acc", "len", "64", False, "interpolate+error")),
]  # fmt: skip


@pytest.mark.parametrize("args, name, parsed", CASES, ids=[c[1] for c in CASES])
def test_a_name_reads_back_as_what_wrote_it(args, name, parsed):
    assert metric_name(*args) == name
    assert parse_metric(name) == parsed
    assert parsed.name == name  # name -> parse -> name
    loss = metric_name(*args, stat="loss")
    assert loss == name.replace("test/acc@", "test/loss@")
    assert parse_metric(loss) == BeyondSize("loss", parsed.kind, parsed.size, parsed.upsampled, parsed.strategy)
    assert parse_metric(loss).name == loss


def test_a_size_name_is_a_size_too():
    """A parsed size (``"16x32"``) writes the same name as the pair it names."""
    assert metric_name("res", "16x32", "ntk") == metric_name("res", (16, 32), "ntk") == "test/acc@res16x32/ntk"
    assert metric_name("res", "48") == metric_name("res", 48) == "test/acc@res48"


@pytest.mark.parametrize(
    "name",
    [
        "test/acc",
        "test/loss",
        "test/acc_flip",
        "val/acc_best",
        "time/eval_min",
        "test/acc@res32_mean",  # a report column: strip its suffix first
        "test/acc@res",
        "test/acc@resx32",
        "test/acc@area32",
        "test/f1@res32",
        "train/acc@res32",
        "test/acc@res32/",
        "params",
    ],
)
def test_a_name_that_is_not_a_score_beyond_the_training_size_is_none(name):
    assert parse_metric(name) is None


def test_an_unknown_stat_or_kind_is_refused():
    with pytest.raises(ValueError, match="no metric"):
        metric_name("res", 32, stat="f1")
    with pytest.raises(ValueError, match="no metric"):
        metric_name("area", 32)


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _uses_re(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name in ("re", "regex") for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module in ("re", "regex"):
            return True
    return False


def _names_a_score(text: str) -> bool:
    """Whether ``text`` may be (part of) a pattern of these names: ``acc@``, ``(acc|loss)@(res|len)``."""
    return "@" in text and ("acc" in text or "loss" in text)


def name_patterns(path: Path) -> list[str]:
    """``path:line`` of every string (docstrings aside) that may be a pattern of these names in a
    module that uses regular expressions: a parse of them outside their owner."""
    tree = ast.parse(path.read_text())
    if not _uses_re(tree):
        return []
    skip = _docstrings(tree)
    return [
        f"{path.relative_to(ROOT).as_posix()}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
        if _names_a_score(node.value)
    ]


def test_only_the_owner_parses_the_names_with_a_regular_expression():
    files = [p for folder in ("vitpos", "scripts", "bench") for p in sorted((ROOT / folder).rglob("*.py"))]
    assert (ROOT / OWNER) in files
    assert name_patterns(ROOT / OWNER), "the check finds the owner's own pattern (so it would find another's)"
    found = [hit for p in files if p.relative_to(ROOT).as_posix() != OWNER for hit in name_patterns(p)]
    assert not found, (
        f"a regular expression over metric names outside {OWNER}; read a name with vitpos.metrics.parse_metric "
        "and write one with metric_name instead:\n  " + "\n  ".join(found)
    )
