"""Hydra's multi-line composition errors as one :class:`UserError` line (``<option>: <what> (<fix>)``): the failing
key and its section's keys come from OmegaConf's error (``full_key``, ``parent_node``), with no second composition."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from hydra.errors import MissingConfigException, OverrideParseException
from omegaconf import DictConfig
from omegaconf.errors import ConfigKeyError, ConfigTypeError, ValidationError

from vitpos.checks.options import LAUNCHERS_WITH_OPTIONS, check_launcher
from vitpos.cli.train_help import config_names
from vitpos.config import SCHEMAS, defaults, schema_option
from vitpos.errors import UserError

NULL_GROUP = "Config group override must be a string or a list"  # optim=null: Hydra's ValueError
HELP = "python train.py --help"


def override_error(err: Exception, configs: Path, words: list[str] = ()) -> UserError:
    """Hydra's composition error ``err`` as one line; ``configs`` lists a group's options, ``words`` (the
    command's overrides) name the key that failed where Hydra's exception does not."""
    text = str(err)
    if NULL_GROUP in text:  # Hydra refuses null for a group even when it is the default (ablation)
        group = next((_key(w) for w in words if _value(w) == "null" and (configs / _key(w)).is_dir()), None)
        if group is None:
            return UserError("command line", NULL_GROUP, HELP)
        fix = f"leave {group}= out for its default, or pick one of: {', '.join(config_names(configs, group))}"
        return UserError(group, "a config group cannot be set to null on the command line", fix)
    if isinstance(err, OverrideParseException) and err.override:  # a value Hydra's grammar cannot read: quoted
        key, value = _key(err.override), _value(err.override)
        if value.count("[") != value.count("]") or value.count("{") != value.count("}"):
            return UserError(key, f"cannot read {value!r}: a bracket is not closed", f"write a list as {key}=[a,b]")
        what = f"Hydra's override grammar cannot read the value {value!r} (~ [ ] {{ }} , = ' and spaces mean something)"
        return UserError(key, what, f"quote the value for Hydra inside quotes for the shell: \"{key}='{value}'\"")
    if "Sweeping over Hydra's configuration is not supported" in text:  # -m hydra.launcher.n_jobs=1,2
        key = text.rpartition("'")[0].rpartition("'")[2].partition("=")[0]
        return UserError(key, "Hydra sweeps the run's options, not its own", f"one sweep per value: {key}=<value>")
    missing = _cause(err, lambda e: isinstance(e, MissingConfigException) and e.missing_cfg_file)
    if missing is not None and "/" in missing.missing_cfg_file:  # <group>=<name> names no config
        group, _, name = str(missing.missing_cfg_file).rpartition("/")
        options = list(missing.options or ()) or config_names(configs, group)  # hydra/launcher: its plugins' too
        what = f"no {'encoding' if group == 'encoding' else 'config'} {name!r}"
        return UserError(group, what, f"valid: {', '.join(options)}")
    if (in_file := _unknown_file_key(err, words)) is not None:
        return in_file
    deleted = _cause(err, lambda e: isinstance(e, ConfigTypeError) and "does not support deletion" in str(e))
    if getattr(deleted, "full_key", None):  # ~model.patch_size: a typed group's option
        key = str(deleted.full_key)
        return UserError(key, "an option of its group cannot be deleted", f"give it a value instead: {key}=...")
    typed = _cause(err, lambda e: isinstance(e, ValidationError))
    if getattr(typed, "full_key", None):  # a value the typed config refuses
        key = str(typed.full_key)
        value = next((_value(w) for w in words if _key(w) == key), None)
        section, _, leaf = key.rpartition(".")
        if section == "hydra.launcher" and value is not None:  # hydra.launcher.timeout_min=abc: the option's rule
            try:
                check_launcher({leaf: value})
            except UserError as rule:
                return rule
        what = str(typed).splitlines()[0] if str(typed) else type(typed).__name__
        return UserError(key, what, "python train.py --cfg hydra shows Hydra's options and their values")
    return _key_error(err, words, text) or UserError("command line", " ".join(text.split())[:300], HELP)


def _key(word: str) -> str:
    """The key an override sets: ``optim.lr`` of ``+optim.lr=1``."""
    return word.partition("=")[0].lstrip("+~")


def _value(word: str) -> str:
    return word.partition("=")[2]


def _key_error(err: BaseException, words: list[str], text: str) -> UserError | None:
    """A key the config lacks, named by OmegaConf's error (``full_key``; the command's word for it or a key below it),
    whose ``parent_node`` holds its section's keys for a suggestion. Hydra's refusals of ``+`` on a key the config
    has or ``~`` on one it lacks carry no field: for those only, the key is read from Hydra's message (quoted)."""
    lookup = _cause(err, lambda e: getattr(e, "full_key", None))
    if lookup is not None:
        full = str(lookup.full_key)
        key = next((k for k in map(_key, words) if k == full or k.startswith(full + ".")), full)
    elif quoted := re.match(r"Could not (?:append to|delete from) config\.[^']*'([^'=]+)'", text):
        key = quoted.group(1)
    else:
        return None
    if text.startswith("Could not append to config."):
        return UserError(key, "is already set: a leading + adds a new key", f"drop the +: {key}=...")
    if text.startswith("Could not delete from config."):
        return UserError(key, "not in the config: nothing to delete", "python train.py --cfg job shows the config")
    section, _, leaf = key.rpartition(".")
    found = _cause(err.__cause__, lambda e: hasattr(e, "parent_node"))
    node = getattr(found, "parent_node", None)  # the section the key was looked up in (missing too: none)
    in_node = section and isinstance(node, DictConfig) and getattr(found, "full_key", None) == key
    known = [str(k) for k in node.keys() if not str(k).startswith("_")] if in_node else []  # _target_: no option
    close = difflib.get_close_matches(leaf, known, n=1)
    hydras = key.startswith("hydra.") and not close  # a section of Hydra's (hydra.launcher): its class's options
    if close or known:
        hint = (
            f"did you mean {section}.{close[0]}?" if close else f"valid: {', '.join(f'{section}.{k}' for k in known)}"
        )
    elif section == "hydra.launcher":  # Hydra's basic launcher, the default
        hint = f"the launcher chosen takes none; {LAUNCHERS_WITH_OPTIONS} take some"
    else:
        hint = f"{section} has none here" if hydras else "see configs/train.yaml"
    fix = "python train.py --cfg hydra lists them" if hydras else f"+{key}=... adds a new key"
    return UserError(key, "no such option", f"{hint}; {fix}")


def _unknown_file_key(err: BaseException, words: list[str]) -> UserError | None:
    """A key that a YAML file sets and its group's schema lacks (OmegaConf's error names both; the file is the one
    Hydra's message names first: no field has it). None when the command line wrote the key."""
    found = _cause(err, lambda e: isinstance(e, ConfigKeyError) and getattr(e, "full_key", None), context=True)
    option = schema_option(getattr(found, "object_type", None))
    key = str(getattr(found, "full_key", ""))
    if option is None or key in map(_key, words):
        return None
    named = re.match(r"In '([^']+)'", str(err))
    file = f"{named.group(1) if named else '/'.join(option)}.yaml"
    valid = ", ".join(f"{option[0]}.{k}" for k in defaults(SCHEMAS[option]))
    return UserError(key, f"no such option (set in {file})", f"valid: {valid}")


def _cause(err: BaseException | None, found, context: bool = False) -> BaseException | None:
    """The first exception of ``err``'s cause chain (``context``: and its context) that is ``found``."""
    while err is not None and not found(err):
        err = err.__cause__ or (err.__context__ if context else None)
    return err
