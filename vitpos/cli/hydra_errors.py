"""Hydra's multi-line composition errors as one :class:`UserError` line.

``train.py`` composes the command's config once before Hydra runs it; when that
composition fails, :func:`override_error` words the failure the way every other
bad input is worded (``<option>: <what> (<fix>)``). The keys it suggests for a
misspelt option come from the failed composition itself: OmegaConf's error
carries the config node in which the key was looked up, so no second
composition is needed.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from hydra.errors import OverrideParseException
from omegaconf import DictConfig

from vitpos.errors import UserError

MISSING_CONFIG = re.compile(r"Could not (?:find|load) '([\w/]+)/([^']+)'")
NULL_GROUP = "Config group override must be a string or a list"  # optim=null: Hydra's ValueError
BAD_KEY = (re.compile(r"Could not (?:override|append to) '([^']+)'"), re.compile(r"full_key: (\S+)"))


def override_error(err: Exception, configs: Path, words: list[str] = ()) -> UserError:
    """Hydra's composition error ``err`` as one :class:`UserError`: an unknown group option
    lists the group's configs (``configs/<group>/*.yaml``; encodings: the registry, image and
    sequence), an unknown key suggests the closest key of its section (:func:`known_keys`), a
    group set to null (Hydra's plain ``ValueError``) names the group among the command's ``words``."""
    text = str(err)
    if NULL_GROUP in text:
        return _null_group(words, configs) or UserError("command line", NULL_GROUP, "python train.py --help")
    if isinstance(err, OverrideParseException) and err.override:
        return _unparsable(err.override)
    missing = MISSING_CONFIG.search(text)
    if missing:
        return _missing_config(*missing.groups(), configs)
    bad = BAD_KEY[0].search(text) or BAD_KEY[1].search(text)
    if bad:
        key = bad.group(1).lstrip("+~")
        section, _, leaf = key.rpartition(".")
        known = known_keys(err, key)
        close = difflib.get_close_matches(leaf, known, n=1)
        prefix = section + "." if section else ""
        if close:
            hint = f"did you mean {prefix}{close[0]}?"
        else:
            hint = f"valid: {', '.join(prefix + k for k in known)}" if known else "see configs/train.yaml"
        return UserError(key, "no such option", f"{hint}; +{key}=... adds a new key")
    first = " ".join(text.split())
    return UserError("command line", first[:300], "python train.py --help")


def _unparsable(override: str) -> UserError:
    """An override Hydra's grammar cannot read (``run.group=~foo``: Hydra reads ``~`` as "delete",
    ``[`` as a list, ``,`` as a sweep...): say so, and how to quote it past both the shell and Hydra."""
    key, _, value = override.partition("=")
    key = key.lstrip("+~")
    if value.count("[") != value.count("]") or value.count("{") != value.count("}"):
        return UserError(key, f"cannot read {value!r}: a bracket is not closed", f"write a list as {key}=[a,b]")
    return UserError(
        key,
        f"Hydra's override grammar cannot read the value {value!r} (~ [ ] {{ }} , = ' and spaces mean something there)",
        f"quote the value for Hydra inside quotes for the shell: \"{key}='{value}'\"",
    )


def _null_group(words: list[str], configs: Path) -> UserError | None:
    """``optim=null``: Hydra refuses null for a config group on the command line, even for one
    whose default is null (``ablation``). The group is the first ``<group>=null`` word."""
    for word in words:
        group, _, value = word.lstrip("+~").partition("=")
        if value == "null" and (configs / group).is_dir():
            options = sorted(p.stem for p in (configs / group).glob("*.yaml"))
            fix = f"leave {group}= out for its default, or pick one of: {', '.join(options)}"
            return UserError(group, "a config group cannot be set to null on the command line", fix)
    return None


def _missing_config(group: str, name: str, configs: Path) -> UserError:
    """``<group>=<name>`` names no config file: the valid names of the group, read from its
    folder (for ``encoding`` the config names are the registry names), so the refusal needs no
    torch. Which of them suit images or sequences the config check says once a name exists."""
    options = sorted(p.stem for p in (configs / group).glob("*.yaml"))
    what = "encoding" if group == "encoding" else "config"
    return UserError(group, f"no {what} {name!r}", f"valid: {', '.join(options)}")


def known_keys(err: BaseException, key: str) -> list[str]:
    """The keys of the section holding ``key`` (``data`` for ``data.batch_sizee``), read from the
    OmegaConf error that Hydra's composition error ``err`` wraps: that error holds the node in
    which the last part of ``key`` was not found. Empty when the section itself does not exist or
    is not a mapping, for a key at the top level (the message then points at configs/train.yaml,
    as it always has), or when the error does not say (a hint only)."""
    cause = err.__cause__
    while cause is not None and not hasattr(cause, "parent_node"):
        cause = cause.__cause__
    node = getattr(cause, "parent_node", None)
    if "." not in key or not isinstance(node, DictConfig) or getattr(cause, "full_key", None) != key:
        return []  # a top-level key, or not the leaf that was missing (its section is missing too)
    return [str(k) for k in node.keys()]
