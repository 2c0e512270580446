"""The model half of the config check: the run's network built as training builds it, so the constructors own
their rules; here only what none can do: an unknown encoding, a plug-in's module and hooks, and a refusal worded
as the one line naming the option at fault (``model=timm``: :mod:`vitpos.integrations.timm_weights`).
"""

from __future__ import annotations

import re
import sys

from vitpos.errors import InputError, UserError
from vitpos.sizes import as_hw


def encoding_names() -> str:
    """The registered encodings, image ones then sequence ones: the hint of an unknown name."""
    from vitpos.encodings import list_encodings

    plugins = [n for n in list_encodings(plugins=True) if n not in list_encodings()]
    also = f"; plug-ins: {', '.join(plugins)}" if plugins else ""
    return f"image: {', '.join(list_encodings(2))}; sequence: {', '.join(list_encodings(1))}{also}"


def check_model(c: dict, image: bool, timm: bool, data_module, plugins: bool = True) -> dict:
    """The encoding's class, then the run's network built with it for ``data_module``'s classes and tokens;
    returns ``c["model"]`` (a timm model's with its geometry). ``plugins=False``: a plug-in is not imported."""
    from vitpos.encodings.plugins import check_hook_shapes, is_builtin
    from vitpos.integrations.timm_weights import check_timm, timm_geometry

    if timm and not image:
        raise UserError("model", "model=timm is an image model", "task=classification, or model=seq_small")
    enc = dict(c["encoding"])
    name, module = enc.pop("name", None), enc.pop("module", None)
    cls = encoding_class(name, module, image, plugins)  # None: a plug-in left unimported
    try:
        if not timm:
            pe = check_network(c, image, data_module, name, enc) if cls else None
        else:
            c = {**c, "model": timm_geometry(c)}
            pe = check_timm(c, name, enc) if cls else None  # lazily built tables check their widths in a hook
        if cls and (timm or not is_builtin(cls)):
            check_hook_shapes(pe)
    except InputError:  # the network's memory, a timm model or checkpoint
        raise
    except Exception as err:
        builtin_bug = is_builtin(cls) and not isinstance(err, ValueError | TypeError | KeyError | RuntimeError)
        if builtin_bug or "dim" not in c["model"]:  # a bug, or timm failed before the model's geometry was known
            raise
        refuse_network_error(c, cls, err)
    return c["model"]


def encoding_class(name, module, image: bool, plugins: bool):
    """The class of the encoding ``name`` (a plug-in's ``module`` imported first, not at all with ``plugins=False``:
    then None), refused as one line when unknown or made for the other task."""
    from vitpos.encodings import get_encoding_class

    if module is not None or name is None:
        check_plugin(name, module, load=plugins)
        if not plugins:
            return None
    try:
        cls = get_encoding_class(str(name))
    except KeyError:
        raise UserError("encoding.name", f"unknown encoding {name!r}", encoding_names()) from None
    if (2 if image else 1) not in cls.grid_dims:
        raise UserError(
            "encoding",
            f"'{name}' is for {'sequences' if image else 'images'}, this is an {'image' if image else 'sequence'} task",
            encoding_names(),
        )
    return cls


def refuse_network_error(c: dict, cls, err: Exception) -> None:
    """The one line for an error of the network check, blamed on the option that caused it: one the class or
    the model refused, a value the class could not read, else a width it cannot use; a plug-in: its own code."""
    from vitpos.encodings import OptionError
    from vitpos.encodings.plugins import is_builtin

    if isinstance(err, OptionError):  # an unknown option, a bad value or strategy: named by the class that owns it
        raise UserError(err.option, err.args[0].rstrip("."), err.fix or default_of(cls, err.option)) from None
    message = " ".join(str(err.args[0] if isinstance(err, KeyError) and err.args else err).split())
    if not is_builtin(cls):  # the plug-in's own code: where and what
        where = getattr(sys.modules.get(cls.__module__), "__file__", None) or cls.__module__
        raise UserError("encoding", f"the plug-in {cls.name!r} ({where}) failed on the training grid: "
                        f"{type(err).__name__}: {message or '(no message)'}",
                        "fix the plug-in's hooks, then run again") from None  # fmt: skip
    unknown = re.match(r"(\w+)\.__init__\(\) got an unexpected keyword argument '(\w+)'", message)
    if isinstance(err, TypeError) and unknown and unknown.group(1) != cls.__name__:  # the model's, not the encoding's
        key = unknown.group(2)
        raise UserError(f"model.{key}", f"not an option of the model ({unknown.group(1)})",
                        f"leave +model.{key} out; python train.py --help lists the model's options")  # fmt: skip
    given = {k: v for k, v in c["encoding"].items() if k not in ("name", "module")}
    texts = {k: [x for x in (v if isinstance(v, list) else [v]) if isinstance(x, str)] for k, v in given.items()}
    culprit = next((f"encoding.{k}" for k, xs in texts.items() if any(repr(x) in message for x in xs)), None)
    if culprit is not None:  # a value the class could not read (int('x')): that option, not the model's width
        raise UserError(culprit, message.rstrip("."), default_of(cls, culprit)) from None
    m = c["model"]
    raise UserError("encoding", message.rstrip("."), f"model: dim {m['dim']}, {m['num_heads']} heads") from None


def default_of(cls, option: str) -> str:
    """The fix for a bad value of ``option`` (``encoding.base``): the class's default for it."""
    leaf = option.rpartition(".")[2]
    try:
        return f"its default: {option}={cls.option_default(leaf)}"
    except KeyError:
        return f"{cls.name}'s options: {', '.join(cls.option_names())}"


def check_network(c: dict, image: bool, data_module, name: str, options: dict):
    """Build the run's network as training does and run one training-size example through it; returns the
    encoding module. First its training state is held against the memory free now (counted on ``meta`` with
    one and two blocks: a network of tens of GB would fill the machine in the check itself)."""
    import torch

    from vitpos.eval_memory import training_memory_problem
    from vitpos.models import network

    data = c["data"]
    sizes = (int(data.get("num_classes") or 10),) if image else (data_module.num_classes, data_module.input_vocab)
    try:
        with torch.device("meta"):
            nets = [network({**c, "model": {**c["model"], "depth": blocks}}, *sizes) for blocks in (1, 2)]
            one, two = (sum(p.numel() for p in net.parameters()) for net in nets)
        params = one + (int(c["model"]["depth"]) - 1) * (two - one)  # a million blocks: no million objects
    except Exception:  # noqa: BLE001 (a constructor that needs real values: the real build says what is wrong)
        params = None
    if params is not None and (problem := training_memory_problem(c, params)) is not None:
        raise problem
    model = network(c, *sizes).eval()  # (classes,) or (classes, vocabulary)
    if image:
        example = torch.zeros(1, 3, *as_hw(data["img_size"], "data.img_size"))  # (1, C, H, W)
    else:
        example = torch.zeros(1, data["train_len"], dtype=torch.long)  # (1, N) tokens
    with torch.no_grad():
        model(example)
    return model.pos


def check_plugin(name, module, load: bool = True) -> None:
    """``encoding=plugin``: ``encoding.module`` and ``encoding.name`` given and the module imports (as one
    line when it does not); ``load=False``: the module is found, not imported."""
    from vitpos.encodings.plugins import is_missing, load_module, module_digest

    if not module or not name:
        raise UserError(
            "encoding.module" if not module else "encoding.name",
            "an encoding of your own needs its file and its registered name",
            "encoding=plugin encoding.module=<file.py or module> encoding.name=<name>",
        )
    if not load:
        if module_digest(str(module)) is None:
            raise UserError("encoding.module", f"{module}: no such file or module",
                            "give a .py file or an importable module name")  # fmt: skip
        return
    try:
        load_module(str(module))
    except Exception as err:  # not found, or the plug-in's own code failed (an import inside it too): one line
        if is_missing(err, str(module)):
            raise UserError("encoding.module", str(err), "give a .py file or an importable module name") from None
        what = " ".join(str(err).split()) or type(err).__name__
        raise UserError("encoding.module", f"{module} failed to import: {type(err).__name__}: {what}",
                        "fix the plug-in (or install what it imports), then run again") from None  # fmt: skip
