"""Run identity: which folder a configuration trains in.

    runs/<group>/<model>/<label>-<hash>/seed<k>
    e.g. runs/cifar10/vit_micro/sincos_2d-3fa9c1/seed0

``group`` is ``run.group`` (the data set's name by default, ``debug`` for the
debug configs, the experiment's name for sweeps), ``model`` the model config
chosen (``model=vit_micro``), ``label`` the encoding (``@strategy`` when not
its default; ``run.label`` overrides it) and ``hash`` six hex digits of
everything else that defines the run (:func:`identity`: model and the content of
its starting weights, data budget and the data set's fingerprint, encoding options,
optimizer, task, epochs).

Why a hash on every run rather than only on non-default ones: the name stays
readable, two different configurations can never share a folder (the README's
``debug=subset`` run and the full recipe used to collide), the same command
always maps to the same folder (so it resumes), and the seeds of one
configuration sit side by side under one folder, which is what ``compare``
averages over. ``train.py`` prints the folder and the commands to look at it.

A folder must survive an upgrade and a move: a key added to the configs later counts only where
it changes what runs (:func:`counts`), and the saved config records what the hash read from the
machine (:func:`record`: the data's fingerprint, the resolved precision, the digest of the
``model.checkpoint`` file), so a copied run names its folder without the data or that file, on
any machine.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from vitpos.checks.options import OPTIONS
from vitpos.data.fingerprint import data_fingerprint
from vitpos.encodings import get_encoding_class
from vitpos.encodings.plugins import is_builtin, module_digest, source_digest
from vitpos.run.hashed_keys import ENCODING_KEYS, SECTION_KEYS
from vitpos.runtime import machine_kind, trainer_precision
from vitpos.sizes import compact

#: config sections that define a run (what ``resume=auto`` compares, what the hash covers); which of
#: their keys count is the schema's word (vitpos/checks/options.py: ``defines``, ``as_before``)
RUN_DEFINING = ("model", "encoding", "data", "optim", "task", "trainer")
#: image sizes (a side or an [h, w] pair): hashed as vitpos.sizes.compact writes them, a side for a
#: square and "HxW" otherwise, so [32, 32] is the run 32 is and every run with a side keeps its hash
SIZE_KEYS = ("img_size", "native_size")
MODEL_CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "model"


def identity(cfg: DictConfig | dict) -> dict:
    """The run-defining part of ``cfg`` as plain containers (seed and run names excluded).

    Each key of :data:`RUN_DEFINING`'s sections counts unless the schema says it does not define
    the run or it is at a value that keeps the earlier behaviour (:func:`counts`); a strategy alias counts as
    the strategy it names. The data set counts by its content fingerprint, ``model.checkpoint``
    (a timm run's starting weights) by the digest of the file's content and ``auto`` precision by
    what it resolves to: each as the run recorded it (:func:`record`), else as found here."""
    plain = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else cfg
    recorded = plain.get("run") or {}
    out = {}
    for section in RUN_DEFINING:
        values = plain.get(section) or {}
        out[section] = {k: v for k, v in values.items() if counts(section, k, v, values)}
    out["data"] = _compact_sizes(out["data"])
    _resolve_strategy(out["encoding"])
    source = recorded.get("encoding_source") or plugin_source(plain.get("encoding") or {})
    if source is not None:  # a plug-in is code: its source defines the run, its path does not
        out["encoding"]["source"] = source
    if "precision" in out["trainer"]:  # auto: what it resolved to (vitpos/runtime.py)
        out["trainer"]["precision"] = recorded.get("precision") or trainer_precision(plain.get("trainer") or {})
    if out["model"].get("checkpoint") is not None:  # the starting weights by their content, not their path
        weights = recorded.get("checkpoint_digest") or checkpoint_digest(out["model"]["checkpoint"])
        out["model"]["checkpoint"] = weights or out["model"]["checkpoint"]  # no file here: its path, as before
    fingerprint = out["data"].pop("fingerprint", None) or recorded.get("data_fingerprint")
    if fingerprint is None:  # what the run trains on, not where it lies (data.root)
        fingerprint = data_fingerprint(plain.get("data") or {})
    if fingerprint is not None:
        out["data"]["fingerprint"] = fingerprint
    return out


def counts(section: str, key: str, value, values: dict) -> bool:
    """Whether ``section.key = value`` is part of the run's identity (``values``: the section): not
    where the schema (:data:`vitpos.checks.options.OPTIONS`) says the option does not define the run,
    nor at a value its ``as_before`` names for an option the hash did not always cover (so a folder
    made before the option existed is found again); an encoding's ``module`` never (its code counts,
    :func:`plugin_source`). Any other key: as :mod:`vitpos.run.hashed_keys` and
    :func:`new_key_matters` say."""
    spec = OPTIONS.get(f"{section}.{key}")
    if (spec is not None and not spec.defines) or (section, key) == ("encoding", "module"):
        return False
    if spec is not None and spec.as_before:
        return value not in spec.as_before
    if section == "encoding":
        known = key == "name" or key in ENCODING_KEYS.get(str(values.get("name")), ())
        return known or new_key_matters(values, key, value)
    return key in SECTION_KEYS.get(section, ()) or value is not None


def new_key_matters(encoding: dict, key: str, value) -> bool:
    """An encoding option the hash has not always covered (every option of an encoding added since)
    counts unless it is null or at its default: the ``__init__`` default, or for ``strategy`` the
    class's first strategy (an alias resolved). So an option added to an encoding keeps every
    earlier run's folder, and a new encoding's folder does not depend on which defaults its
    config file spells out."""
    if value is None:
        return False
    try:
        cls = get_encoding_class(str(encoding.get("name")))
        if key == "strategy":
            return cls.strategy_aliases.get(value, value) != cls.strategies[0]
        return value != cls.option_default(key)
    except KeyError:  # not an option of the class (the check refuses it before any run)
        return True


def plugin_source(encoding: dict) -> str | None:
    """The source digest of the encoding's class when it comes from outside the package (a
    plug-in file, module or entry point; :func:`vitpos.encodings.plugins.source_digest`), else
    None. A plug-in that cannot be loaded here has none (the check refuses such a run)."""
    if encoding.get("module"):  # the file the command names, read without importing it again
        try:
            return module_digest(str(encoding["module"]))
        except (ImportError, ValueError, OSError):
            return None
    try:
        cls = get_encoding_class(str(encoding.get("name")))
    except KeyError:
        return None
    return None if is_builtin(cls) else source_digest(cls)


def _resolve_strategy(encoding: dict) -> None:
    """An alias (``linear``) counts as the strategy it names (``interpolate``): one run, one folder."""
    strategy = encoding.get("strategy")
    if isinstance(strategy, str):
        try:
            aliases = get_encoding_class(str(encoding.get("name"))).strategy_aliases
        except KeyError:  # an unknown encoding: the check refuses it before any run
            return
        encoding["strategy"] = aliases.get(strategy, strategy)


def record(cfg: DictConfig) -> None:
    """Write into ``cfg.run`` what the run's identity found on this machine, so that the saved
    config (``hparams.yaml``, every checkpoint) names the run without the data or the machine:
    ``data_fingerprint`` (the data set's content, :mod:`vitpos.data.fingerprint`; null for generated
    data), ``precision`` (``trainer.precision`` resolved) and ``machine``
    (:func:`vitpos.runtime.machine_kind`), for a plug-in encoding ``encoding_source`` (the digest
    of its code, :func:`plugin_source`), and for a run with ``model.checkpoint``
    ``checkpoint_digest`` (the file's content, :func:`checkpoint_digest`). Values the config
    already records are kept."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    trainer = plain.get("trainer") or {}
    found = {
        "data_fingerprint": data_fingerprint(plain.get("data") or {}),
        "precision": trainer_precision(trainer),  # as the hash has always seen it (an int stays an int)
        "machine": machine_kind(trainer.get("accelerator", "auto")),
        "encoding_source": plugin_source(plain.get("encoding") or {}),
    }
    weights = (plain.get("model") or {}).get("checkpoint")
    if weights is not None:  # recorded only where there is a file: every other run's config stays as it was
        found["checkpoint_digest"] = checkpoint_digest(weights)
    with open_dict(cfg):
        for key, value in found.items():
            if cfg.run.get(key) is None:
                cfg.run[key] = value


def checkpoint_digest(path) -> str | None:
    """12 hex digits of the content of the file ``model.checkpoint`` names (a timm run's starting
    weights), or None where no such file is here. The content, not the path, defines the run:
    other weights saved over the same file are a new run, the same file moved is the same run."""
    file = Path(str(path)).expanduser()
    try:
        stat = file.stat()
    except OSError:
        return None
    return _file_digest(str(file.resolve()), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=16)
def _file_digest(path: str, size: int, mtime_ns: int) -> str | None:
    """The sha256 of the file at ``path``, first 12 hex digits; ``size`` and ``mtime_ns`` only key
    the in-process cache (the hash is asked for several times per run), so a file rewritten is read again."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:  # a folder, no permission: the config check refuses the run
        return None
    return digest.hexdigest()[:12]


def _compact_sizes(data: dict) -> dict:
    """``data`` with its image sizes (:data:`SIZE_KEYS`, each of ``train_sizes``) as
    :func:`vitpos.sizes.compact` writes them; a value that is not a size stays as it is."""

    def one(value):
        try:
            return compact(value)
        except ValueError:
            return value

    out = {**data, **{key: one(data[key]) for key in SIZE_KEYS if data.get(key) is not None}}
    if isinstance(data.get("train_sizes"), list):
        out["train_sizes"] = [one(s) for s in data["train_sizes"]]
    return out


def config_hash(cfg) -> str:
    """Six hex digits of :func:`identity` (order of keys does not matter)."""
    text = json.dumps(identity(cfg), sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:6]


def run_label(cfg: DictConfig) -> str:
    """The encoding (combination parts joined by '+'), then ``@strategy`` when
    that is not the encoding's default; ``run.label`` when set."""
    if cfg.run.get("label"):
        return str(cfg.run.label)
    enc = cfg.encoding
    label = "+".join(enc.parts) if enc.name == "combo" else str(enc.name)
    strategy = enc.get("strategy")
    if strategy and enc.name != "combo":
        cls = get_encoding_class(enc.name)
        strategy = cls.strategy_aliases.get(strategy, strategy)  # linear and interpolate: one folder
        if strategy != cls.strategies[0]:
            label += f"@{strategy}"
    return label


def model_name(cfg: DictConfig) -> str:
    """``run.model`` (``train.py`` sets it to the chosen ``model=...``), else the
    configs/model file equal to ``cfg.model``, else ``custom``."""
    if cfg.run.get("model"):
        return str(cfg.run.model)
    model = OmegaConf.to_container(cfg.model, resolve=True)
    for path in sorted(MODEL_CONFIGS.glob("*.yaml")):
        if OmegaConf.to_container(OmegaConf.load(path)) == model:
            return path.stem
    return "custom"


def run_dir(cfg: DictConfig) -> Path:
    """``run.root/group/model/label-hash/seed<k>`` (see the module docstring)."""
    name = f"{run_label(cfg)}-{config_hash(cfg)}"
    return Path(cfg.run.root) / str(cfg.run.group) / model_name(cfg) / name / f"seed{cfg.seed}"


#: ``eval.test_subset`` in configs/task/classification.yaml: the extrapolation command printed after
#: training names the run's own value when it is another (:func:`next_commands`)
TEST_SUBSET = 1000


def next_commands(
    folder: Path, task: str, best: str | Path | None = None, module: str | None = None, test_subset=TEST_SUBSET
) -> str:
    """What to run next to look at the run in ``folder`` (printed at the end of training).

    The tools get ``best``, the checkpoint that ``test/acc`` scored, when there is one, so that
    their numbers match the ones printed at the end of training (``last.ckpt`` holds the last
    epoch, which may differ); the extrapolation tool gets ``test_subset=``, the run's
    ``eval.test_subset``, when it is not the default (the tool reads the run's own anyway: the
    command says so where the reader would not expect it)."""
    runs = folder.parents[3] if len(folder.parents) > 3 else folder.parent
    group = folder.parents[2] if len(folder.parents) > 2 else folder.parent
    ckpt = Path(best) if best else folder / "checkpoints" / "last.ckpt"
    if ckpt.is_absolute() and not folder.is_absolute() and ckpt.is_relative_to(Path.cwd()):
        ckpt = ckpt.relative_to(Path.cwd())  # as the run folder is printed
    plugin = f" module={module}" if module else ""  # a plug-in: the tools load it only when told
    subset = "" if task == "sequence" or test_subset == TEST_SUBSET else f" test_subset={_word(test_subset)}"
    lines = [
        "next:",
        f"  tensorboard --logdir {runs}",
        f"  python -m vitpos.compare runs={group} out={group}/report",
        f"  python -m vitpos.extrapolate ckpt={ckpt}{plugin}{subset} out={folder}/extrapolation",
    ]
    if task != "sequence":
        lines.append(f"  python -m vitpos.viz ckpt={ckpt}{plugin} out={folder}/viz")
    return "\n".join(lines)


def _word(value) -> str:
    """A value as a ``key=value`` word: ``null`` for None."""
    return "null" if value is None else str(value)
