"""No literal default for a typed config key outside the config module (vitpos/config).

A key of a typed group (its dataclass in :data:`vitpos.config.SCHEMAS`) has its default in one place, the
schema; code that reads it with a default of its own (``.get("key", default)``, ``getattr(cfg, "key",
default)``, ``OmegaConf.select(cfg, "...key", default=...)``, ``cfg["key"] if "key" in cfg else ...``) could
disagree with it unseen, as ``optim.min_lr_ratio`` once did (0.0 in the code, 0.01 in every run). A config
that may lack a key (a checkpoint saved before it existed) is completed in the config module
(:mod:`vitpos.config.saved`). The scan reads the source with :mod:`ast`; a key another mapping shares by name
is listed in :data:`ALLOWED`, with why.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

from conftest import ROOT

from vitpos import config

#: the groups whose keys are held: every group with a schema in vitpos/config
GROUPS = sorted({group for group, _ in config.SCHEMAS})
#: the config's sections: a read from a mapping named after one that is not typed (``run``) is that section's
SECTIONS = ("data", "model", "encoding", "optim", "task", "trainer", "eval", "run", "hydra", "logger")
#: (file, key) -> why that fallback is not one of a typed key's
ALLOWED: dict[tuple[str, str], str] = {
    ("vitpos/data/options.py", "name"): "ImageDataModule() without a name is CIFAR-10: the module's argument",
    ("vitpos/tasks/build.py", "seed"): "the run's own top-level seed (no group), not a sequence data set's seed",
    ("vitpos/compare/protocol.py", "name"): "a report shows any saved run config, one without data.name as '?'",
    ("vitpos/viz/__main__.py", "img_size"): "viz of a fresh model has no data config: random images at 32 px",
    ("vitpos/callbacks.py", "fast_dev_run"): "Lightning's Trainer object, not the config",
    ("vitpos/data/images.py", "max_epochs"): "Lightning's Trainer object (none when no trainer drives the module)",
    ("vitpos/runtime.py", "precision"): "a helper on any trainer mapping, a saved run's or a tool's own",
    ("vitpos/runtime.py", "accelerator"): "a helper on any trainer mapping, a saved run's or a tool's own",
    ("vitpos/run/identity.py", "accelerator"): "records the machine of any config a tool names a folder for",
    ("vitpos/checks/options.py", "precision"): "the check also reads the saved job configs of older runs (compare)",
    ("vitpos/checks/options.py", "devices"): "the check also reads the saved job configs of older runs (compare)",
    ("vitpos/benchmark/plan.py", "accelerator"): "the benchmark's plan of a sweep job's config, planned before any",
}


def schema_keys() -> set[str]:
    """Every key of the held groups' schemas."""
    schemas = [schema for (group, _), schema in config.SCHEMAS.items() if group in GROUPS]
    return {f.name for schema in schemas for f in dataclasses.fields(schema)}


def held(key: str, mapping: str) -> bool:
    """Whether reading ``key`` from the mapping whose source text is ``mapping`` reads a typed key: the key is one,
    and the mapping is not named after a section that has no schema (``run.get("root", ...)`` is not data's)."""
    named = {word for word in SECTIONS if re.search(rf"\b{word}\b", mapping)}
    return key in schema_keys() and (not named or bool(named & set(GROUPS)))


def sources() -> list[Path]:
    """The code that reads configs: the package outside its config module, the command and the plug-ins."""
    files = [*(ROOT / "vitpos").rglob("*.py"), ROOT / "train.py", *(ROOT / "hydra_plugins").rglob("*.py")]
    return sorted(p for p in files if (ROOT / "vitpos" / "config") not in p.parents)


def fallbacks(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, key, the mapping's source text) of each read with a default of its own, in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func, args = node.func, node.args
            if isinstance(func, ast.Attribute) and func.attr == "get" and len(args) == 2 and _text(args[0]):
                if not (isinstance(args[1], ast.Constant) and args[1].value is None):
                    found.append((node.lineno, args[0].value, ast.unparse(func.value)))
            elif isinstance(func, ast.Name) and func.id == "getattr" and len(args) == 3 and _text(args[1]):
                found.append((node.lineno, args[1].value, ast.unparse(args[0])))
            elif isinstance(func, ast.Attribute) and func.attr == "select" and len(args) == 2 and _text(args[1]):
                if any(k.arg == "default" for k in node.keywords):
                    section, _, key = args[1].value.rpartition(".")
                    found.append((node.lineno, key, section))
        elif isinstance(node, ast.IfExp) and isinstance(node.test, ast.Compare) and _text(node.test.left):
            if isinstance(node.test.ops[0], ast.In):
                found.append((node.lineno, node.test.left.value, ast.unparse(node.test.comparators[0])))
    return found


def _text(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def test_no_typed_key_has_a_default_outside_the_config_module():
    seen, found = set(), []
    for path in sources():
        name = path.relative_to(ROOT).as_posix()
        for line, key, mapping in fallbacks(ast.parse(path.read_text(), str(path))):
            if held(key, mapping) and (name, key) in ALLOWED:
                seen.add((name, key))
            elif held(key, mapping):
                found.append(f"{name}:{line}: {mapping}: {key}")
    assert not found, "a default beside the schema's (vitpos/config):\n" + "\n".join(found)
    assert seen == set(ALLOWED), f"no longer there, drop from ALLOWED: {set(ALLOWED) - seen}"


def test_the_scan_finds_each_kind_of_fallback():
    """Each form the scan looks for is found, so a passing scan means none is there."""
    code = (
        "a = cfg.get('min_lr_ratio', 0.0)\n"
        "b = getattr(cfg, 'ema_decay', 0.0)\n"
        "c = OmegaConf.select(cfg, 'task.flip_tta', default=False)\n"
        "d = cfg['mixup'] if 'mixup' in cfg else 0\n"
        "e = cfg.get('lr')\n"
    )
    found = fallbacks(ast.parse(code))
    expected = [(1, "min_lr_ratio"), (2, "ema_decay"), (3, "flip_tta"), (4, "mixup")]
    assert [(line, key) for line, key, _ in found] == expected
    assert all(held(key, mapping) for _, key, mapping in found)
    assert not held("root", "cfg.run") and held("root", "cfg.data") and not held("nosuch", "cfg")
