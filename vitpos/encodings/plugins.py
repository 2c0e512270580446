"""Encodings from outside the package: an installed plug-in or one file.

An encoding is one module whose class is decorated with :func:`~vitpos.encodings.base.register`.
It reaches the registry in one of three ways:

- **inside the package**: every module of ``vitpos/encodings`` is imported when the package is
  (:func:`import_package_modules`): no import list to edit;
- **an installed package** declares its modules or classes in the entry-point group
  ``vitpos.encodings`` (the convention of pytest and Lightning plug-ins), e.g. in its
  ``pyproject.toml``::

      [project.entry-points."vitpos.encodings"]
      my_enc = "my_package.my_enc"

  They are imported the first time a name is not found among the built-in encodings
  (:func:`load_entry_points`), so installed plug-ins never join the built-in list;
- **a file or module named on the command line** (``encoding.module=my_enc.py``, or the tools'
  ``module=``): :func:`load_module`. Nothing loads a module from a path read out of a checkpoint:
  the command names it, as it names the checkpoint.

A plug-in is code: :func:`source_digest` of its source (the defining module and the modules of its own
package or folder that it imports: :mod:`vitpos.encodings.plugin_source`) is part of a run's identity,
so editing any of those files and running again trains again.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import math
import pkgutil
import sys
from pathlib import Path

from . import plugin_source

GROUP = "vitpos.encodings"
FILE_PREFIX = "vitpos_plugin_"  # the module name of a plug-in loaded from a file
_LOADED: dict[str, str] = {}  # what load_module was given -> the module name it imported
_ENTRY_POINTS_LOADED = False


def import_package_modules(package: str, path: list[str]) -> None:
    """Import every module of the package at ``path`` (its encodings register themselves)."""
    for info in sorted(pkgutil.iter_modules(path), key=lambda i: i.name):
        importlib.import_module(f"{package}.{info.name}")


def load_module(spec: str) -> str:
    """Import the plug-in ``spec``, a ``.py`` file or an importable module name (``my_pkg.my_enc``),
    once; returns the module's name. A missing file or module raises :class:`ModuleNotFoundError`
    (``<spec>: no such file``, ``no such module``) before anything runs; an error of the plug-in's
    own import (a module it imports is missing, too) comes through as it is: :func:`is_missing` tells
    the two apart."""
    if spec in _LOADED:
        return _LOADED[spec]
    if _is_file_spec(spec):
        path = Path(spec).expanduser()
        if not path.is_file():
            raise ModuleNotFoundError(f"{spec}: no such file")
        digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
        name = f"{FILE_PREFIX}{path.stem}_{digest}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        try:
            module_spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    else:
        if module_digest(spec) is None:  # not found (a module it imports that is missing: its own error)
            raise ModuleNotFoundError(f"{spec}: no such module")
        name = importlib.import_module(spec).__name__
    _LOADED[spec] = name
    return name


def is_missing(err: BaseException, spec: str) -> bool:
    """Whether ``err`` from :func:`load_module` says ``spec`` itself was not found (not the plug-in's own error)."""
    return isinstance(err, ModuleNotFoundError) and str(err) in (f"{spec}: no such file", f"{spec}: no such module")


def load_entry_points() -> bool:
    """Import the installed plug-ins of the entry-point group ``vitpos.encodings`` (once); returns
    whether this call found any. One that fails to load (a missing module, an error at import, a name
    registered twice) is skipped with one warning line naming it; the others still load."""
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return False
    _ENTRY_POINTS_LOADED = True
    found = list(importlib.metadata.entry_points(group=GROUP))
    for entry in found:
        try:
            entry.load()
        except Exception as err:  # noqa: BLE001  (one broken package must not take the others, or a built-in, down)
            what = " ".join(str(err).split()) or type(err).__name__
            print(f"warning: the installed encoding plug-in {entry.name} ({entry.value}, entry-point group {GROUP}) "
                  f"failed to load and is skipped: {type(err).__name__}: {what}", file=sys.stderr)  # fmt: skip
    return bool(found)


def forget_entry_points() -> None:
    """Let :func:`load_entry_points` look again (a test that puts an entry point on ``sys.path``)."""
    global _ENTRY_POINTS_LOADED
    _ENTRY_POINTS_LOADED = False


def is_builtin(cls: type) -> bool:
    """Whether ``cls`` is one of this package's own encodings."""
    return cls.__module__.startswith(__name__.rsplit(".", 1)[0] + ".")


def source_digest(cls: type) -> str:
    """12 hex digits of the source that defines ``cls``: its module and the modules of its own package
    or folder that it imports (:mod:`vitpos.encodings.plugin_source`): a plug-in's part of a run's identity."""
    path = Path(inspect.getsourcefile(cls))
    if cls.__module__.startswith(FILE_PREFIX):  # loaded from a file by load_module: a loose file
        where = (path.resolve(), path.resolve().parent, path.stem)
    else:
        where = plugin_source.module_root(path, cls.__module__)
    return plugin_source.digest(plugin_source.source_files(*where), where[1])


def module_digest(spec: str) -> str | None:
    """The digest of :func:`source_digest` for the plug-in ``spec`` (a file or a module name), found and
    read without running any of its code (not even a parent package's ``__init__.py``); None when it
    cannot be found."""
    where = plugin_source.locate(spec)
    if where is None:
        return None
    return plugin_source.digest(plugin_source.source_files(*where), where[1])


def _is_file_spec(spec: str) -> bool:
    return spec.endswith(".py") or "/" in spec or "\\" in spec


def load_named(encoding: dict) -> None:
    """Import the plug-in an ``encoding`` config names in ``module`` (``encoding.module=...``),
    if any: the command line named it, so loading it is the user's choice."""
    spec = (encoding or {}).get("module")
    if spec:
        load_module(str(spec))


def check_hook_shapes(pe) -> None:
    """Each hook of the encoding ``pe`` (built for the run's network) keeps the shape it is given on the
    training grid and gives finite values: a plug-in that drops or adds a token would train on shifted
    positions without a word, and one that gives nan would be blamed on ``optim.lr`` by the divergence guard.
    Raises :class:`ValueError` naming the hook (the config check words it as one line)."""
    import torch

    ctx, grid = pe.ctx, pe.train_grid
    n, p = math.prod(grid), pe.num_prefix_tokens
    tokens, full = (1, n, ctx.dim), (1, p + n, ctx.dim)  # (B, N, D), (B, P + N, D)
    qk = (1, ctx.num_heads, p + n, ctx.head_dim)  # (B, H, P + N, Dh)
    with torch.no_grad():
        found = {
            "add_to_tokens": [(pe.add_to_tokens(torch.zeros(tokens), grid), tokens)],
            "after_block": [(pe.after_block(torch.zeros(full), grid, 0), full)],
            "rotate_qk": [(t, qk) for t in pe.rotate_qk(torch.zeros(qk), torch.zeros(qk), grid, 0)],
        }
        bias = pe.attention_bias(grid, 0, torch.device("cpu"), torch.float32)
    if bias is not None:
        found["attention_bias"] = [(bias, (*bias.shape[:-2], p + n, p + n))]
    for hook, pairs in found.items():
        for out, expected in pairs:
            if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(expected):
                shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
                raise ValueError(f"{hook} returned {shape} where {tuple(expected)} was expected "
                                 "(a hook keeps the shape it is given: a token dropped or added shifts every "
                                 "position after it)")  # fmt: skip
            if hook != "attention_bias" and not bool(torch.isfinite(out).all()):  # a bias may mask with -inf
                raise ValueError(f"{hook} returned nan or inf before any training step (the loss would be nan "
                                 "from the first batch, which no optim.lr fixes)")  # fmt: skip
            if hook == "attention_bias" and bool(torch.isnan(out).any()):
                raise ValueError("attention_bias returned nan before any training step")
