"""Run identity: a configuration trains in ``runs/<group>/<model>/<label>-<hash>/seed<k>``, e.g.
``runs/cifar10/vit_micro/sincos_2d-3fa9c1/seed0``: ``run.group`` (the data set, ``debug``, a sweep's experiment), the
``model=`` option, the encoding (``@strategy`` when not its default; ``run.label`` overrides it) and six hex digits of
everything else that defines the run (:func:`identity`). The same command always maps to the same folder (so it
resumes), its seeds side by side for ``compare``; a key added later counts only where it changes what runs
(:func:`counts`), and the saved config records what the hash read from the machine (:func:`record`).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from contextlib import suppress
from functools import lru_cache
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from vitpos.config import OPTIONS, SCHEMAS, defaults
from vitpos.config.encodings import as_lists
from vitpos.config.eval import ImageEval
from vitpos.data.fingerprint import data_fingerprint
from vitpos.encodings import get_encoding_class
from vitpos.encodings.plugins import is_builtin, module_digest, source_digest
from vitpos.run.hashed_keys import DATA_SET_KEYS, ENCODING_KEYS, SECTION_KEYS
from vitpos.runtime import machine_kind, trainer_precision
from vitpos.sizes import compact

#: sections that define a run (hashed, compared by ``resume=auto``); which keys count: vitpos/checks/options.py
RUN_DEFINING = ("model", "encoding", "data", "optim", "task", "trainer")


def identity(cfg: DictConfig | dict) -> dict:
    """The run-defining part of ``cfg`` as plain containers (:func:`counts`; seed and run names excluded). The data
    set counts by its fingerprint, ``model.checkpoint`` by its digest, ``auto`` precision resolved: each as
    :func:`record` saved it, else as found here; a strategy alias as the strategy it names."""
    plain = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else cfg
    out = {}
    for section in RUN_DEFINING:
        values = plain.get(section) or {}
        out[section] = {k: v for k, v in values.items() if counts(section, k, v, values)}
    data = out["data"]  # sizes as vitpos.sizes.compact writes them: [32, 32] is the run 32 is, else "HxW"
    for key in ("img_size", "native_size"):
        if data.get(key) is not None:
            data[key] = _compact(data[key])
    if isinstance(data.get("train_sizes"), list):
        data["train_sizes"] = [_compact(s) for s in data["train_sizes"]]
    if "strategy" in out["encoding"]:
        out["encoding"]["strategy"] = canonical_strategy(out["encoding"].get("name"), out["encoding"]["strategy"])
    if (source := found(plain, "encoding_source")) is not None:  # a plug-in is code: its source, not its path
        out["encoding"]["source"] = source
    if "precision" in out["trainer"]:  # auto: what it resolved to (vitpos/runtime.py)
        out["trainer"]["precision"] = found(plain, "precision")
    if out["model"].get("checkpoint") is not None:  # the starting weights by their content; no file: its path
        out["model"]["checkpoint"] = found(plain, "checkpoint_digest") or out["model"]["checkpoint"]
    fingerprint = data.pop("fingerprint", None) or found(plain, "data_fingerprint")
    if fingerprint is not None:  # what the run trains on, not where it lies (data.root)
        data["fingerprint"] = fingerprint
    return out


#: what the hash reads from this machine, by the ``run`` key :func:`record` saves it under
MACHINE = {
    "data_fingerprint": lambda c: data_fingerprint(c.get("data") or {}),  # null for generated data
    "precision": lambda c: trainer_precision(c.get("trainer") or {}),  # as the hash always saw it (an int stays)
    "machine": lambda c: machine_kind((c.get("trainer") or {}).get("accelerator", "auto")),
    "encoding_source": lambda c: plugin_source(c.get("encoding") or {}),
    "checkpoint_digest": lambda c: checkpoint_digest(c["model"]["checkpoint"]),
}


def found(plain: dict, key: str):
    """``run.<key>`` of the plain config as :func:`record` saved it, else as :data:`MACHINE` finds it here."""
    return (plain.get("run") or {}).get(key) or MACHINE[key](plain)


def counts(section: str, key: str, value, values: dict) -> bool:
    """Whether ``section.key = value`` (``values``: the section) defines the run: not where its rule says not or
    names the value ``as_before``, nor ``encoding.module`` (its code counts); else as :mod:`vitpos.run.hashed_keys`
    and :func:`new_key_matters` say."""
    spec = OPTIONS.get(f"{section}.{key}")
    if (spec is not None and not spec.defines) or (section, key) == ("encoding", "module"):
        return False
    if spec is not None and spec.as_before:
        return value not in spec.as_before
    if section == "encoding":
        known = key == "name" or key in ENCODING_KEYS.get(str(values.get("name")), ())
        return known or new_key_matters(values, key, value)
    if section == "data" and value is None and str(values.get("name")) in DATA_SET_KEYS:
        return key in DATA_SET_KEYS[str(values.get("name"))]  # a key this data set gained at null: as before
    return key in SECTION_KEYS.get(section, ()) or value is not None


def new_key_matters(encoding: dict, key: str, value) -> bool:
    """Whether an encoding option not in :mod:`vitpos.run.hashed_keys` counts: not null nor at its default, so
    adding an option keeps earlier folders, whichever defaults a config file spells out."""
    if value is None:
        return False
    try:
        cls = get_encoding_class(str(encoding.get("name")))
        if key == "strategy":
            return canonical_strategy(encoding.get("name"), value) != cls.strategies[0]
        return as_lists(value) != as_lists(cls.option_default(key))  # a default tuple is a config's list
    except KeyError:  # not an option of the class (the check refuses it before any run)
        return True


def plugin_source(encoding: dict) -> str | None:
    """The source digest of a plug-in encoding; None for a built-in, or one that cannot be loaded (refused)."""
    try:
        if encoding.get("module"):  # the file the command names, read without importing it again
            return module_digest(str(encoding["module"]))
        cls = get_encoding_class(str(encoding.get("name")))
    except (ImportError, ValueError, OSError, KeyError):
        return None
    return None if is_builtin(cls) else source_digest(cls)


def canonical_strategy(name, strategy):
    """``strategy`` with an alias (``linear``) resolved to the strategy it names (``interpolate``): one folder."""
    try:
        return get_encoding_class(str(name)).strategy_aliases.get(strategy, strategy)
    except (KeyError, TypeError):  # an unknown encoding; a strategy that is no name
        return strategy


def record(cfg: DictConfig) -> None:
    """Record in ``cfg.run`` what :func:`identity` reads from this machine (:data:`MACHINE`), so the saved config
    names the run anywhere. Recorded values stay; ``checkpoint_digest`` only with a ``model.checkpoint``."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    weights = (plain.get("model") or {}).get("checkpoint")
    with open_dict(cfg):
        for key in MACHINE:
            if cfg.run.get(key) is None and (key != "checkpoint_digest" or weights is not None):
                cfg.run[key] = MACHINE[key](plain)


def checkpoint_digest(path) -> str | None:
    """12 hex digits of ``model.checkpoint``'s content (new weights: a new run; the file moved: the same), or None."""
    file = Path(str(path)).expanduser()
    try:
        stat = file.stat()
    except OSError:
        return None
    return _file_digest(str(file.resolve()), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=16)
def _file_digest(path: str, size: int, mtime_ns: int) -> str | None:
    """First 12 hex digits of the file's sha256; ``size`` and ``mtime_ns`` key the cache, so a rewrite is re-read."""
    digest = hashlib.sha256()  # hashlib.file_digest: Python 3.11 on
    try:
        with open(path, "rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
    except OSError:  # a folder, no permission: the config check refuses the run
        return None
    return digest.hexdigest()[:12]


def _compact(size):
    with suppress(ValueError):
        return compact(size)
    return size


def config_hash(cfg, ident: dict | None = None) -> str:
    """Six hex digits of :func:`identity` (``ident``, where computed already; order of keys does not matter)."""
    text = json.dumps(identity(cfg) if ident is None else ident, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:6]


def run_label(cfg: DictConfig) -> str:
    """``run.label``, else the encoding (combo parts joined by '+') and ``@strategy`` when not its default."""
    if cfg.run.get("label"):
        return str(cfg.run.label)
    enc = cfg.encoding
    label = "+".join(enc.parts) if enc.name == "combo" else str(enc.name)
    strategy = canonical_strategy(enc.name, enc.get("strategy"))  # linear and interpolate: one folder
    if strategy and enc.name != "combo" and strategy != get_encoding_class(enc.name).strategies[0]:
        label += f"@{strategy}"
    return label


def model_name(cfg: DictConfig) -> str:
    """``run.model`` (set by ``train.py``), else the model option whose defaults ``cfg.model`` has, else ``custom``."""
    if cfg.run.get("model"):
        return str(cfg.run.model)
    model = OmegaConf.to_container(cfg.model, resolve=True)
    options = sorted((option, schema) for (group, option), schema in SCHEMAS.items() if group == "model")
    return next((option for option, schema in options if defaults(schema) == model), "custom")


def run_dir(cfg: DictConfig, ident: dict | None = None) -> Path:
    """``run.root/group/model/label-hash/seed<k>`` (see the module docstring; ``ident``: :func:`identity`)."""
    name = f"{run_label(cfg)}-{config_hash(cfg, ident)}"
    return Path(cfg.run.root) / str(cfg.run.group) / model_name(cfg) / name / f"seed{cfg.seed}"


#: ``eval.test_subset``'s default (:class:`vitpos.config.eval.ImageEval`); :func:`next_commands` names any other
TEST_SUBSET = ImageEval.test_subset


def next_commands(
    folder: Path, task: str, best: str | Path | None = None, module: str | None = None, test_subset=TEST_SUBSET
) -> str:
    """What to run next to look at the run in ``folder``, each word shell-quoted; the tools get ``best`` (the checkpoint
    ``test/acc`` scored), so their numbers match the printed ones."""
    runs, group = (folder.parents[i] if len(folder.parents) > i else folder.parent for i in (3, 2))
    ckpt = Path(best) if best else folder / "checkpoints" / "last.ckpt"
    if ckpt.is_absolute() and not folder.is_absolute() and ckpt.is_relative_to(Path.cwd()):
        ckpt = ckpt.relative_to(Path.cwd())  # as the run folder is printed
    q = shlex.quote  # a word per option, quoted where the shell would split it (a path with a space)
    plugin = f" {q(f'module={module}')}" if module else ""  # a plug-in: the tools load it only when told
    word = "null" if test_subset is None else test_subset
    subset = "" if task == "sequence" or test_subset == TEST_SUBSET else f" test_subset={word}"
    lines = [
        "next:",
        f"  tensorboard --logdir {q(str(runs))}",
        f"  python -m vitpos.compare {q(f'runs={group}')} {q(f'out={group}/report')}",
        f"  python -m vitpos.extrapolate {q(f'ckpt={ckpt}')}{plugin}{subset} {q(f'out={folder}/extrapolation')}",
    ]
    if task != "sequence":
        lines.append(f"  python -m vitpos.viz {q(f'ckpt={ckpt}')}{plugin} {q(f'out={folder}/viz')}")
    return "\n".join(lines)
