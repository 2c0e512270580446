"""The model half of the config check: the run's network built as training builds it (:func:`vitpos.models.network`,
its memory counted first on ``meta``) and one training-size example run through it, so the model's and the
encoding's constructors are the one owner of their rules (widths, head dims, patch sizes, options); what
checks here is only what no constructor can do: an unknown encoding name, a plug-in's module, a refusal turned
into the one line that names the option at fault.

``model=timm``: :func:`timm_geometry` fills in the model's geometry from timm (built on ``meta``: shapes,
no memory); the encoding is built on that geometry and ``model.checkpoint`` planned by the rule the task loads
it with (:func:`vitpos.integrations.timm_weights.plan_checkpoint`). torch is imported inside the functions.
"""

from __future__ import annotations

import math
import re
import sys

from vitpos.errors import InputError, UserError
from vitpos.sizes import as_hw, patch_grid


def encoding_names() -> str:
    """The registered encodings, image ones then sequence ones: the hint of an unknown name."""
    from vitpos.encodings import list_encodings

    plugins = [n for n in list_encodings(plugins=True) if n not in list_encodings()]
    also = f"; plug-ins: {', '.join(plugins)}" if plugins else ""
    return f"image: {', '.join(list_encodings(2))}; sequence: {', '.join(list_encodings(1))}{also}"


def check_model(c: dict, image: bool, timm: bool, data_module, plugins: bool = True) -> dict:
    """Name, strategy and options of ``encoding``, then the run's network built with it for ``data_module``'s
    classes and tokens (:func:`check_network`; ``timm``, a timm model, which the caller asked once:
    :func:`check_timm`); returns ``c["model"]`` with a timm model's geometry filled in (:func:`timm_geometry`).
    ``plugins=False``: a plug-in's module is not imported, so only its name and module are checked."""
    from vitpos.encodings import get_encoding_class
    from vitpos.encodings.plugins import is_builtin

    if timm:
        c = {**c, "model": timm_geometry(c, image)}
    enc = dict(c["encoding"])
    name, module = enc.pop("name", None), enc.pop("module", None)
    if module is not None or name is None:
        check_plugin(name, module, load=plugins)
        if not plugins:
            return c["model"]
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
    try:
        pe = check_timm(c, name, enc) if timm else check_network(c, image, data_module, name, enc)
        if not is_builtin(cls):
            check_hook_shapes(pe)
    except InputError:  # the network's memory, a timm checkpoint
        raise
    except Exception as err:
        if is_builtin(cls) and not isinstance(err, ValueError | TypeError | KeyError | RuntimeError):
            raise
        refuse_network_error(c, cls, err)
    return c["model"]


def refuse_network_error(c: dict, cls, err: Exception) -> None:
    """The one line for an error of the network check (:func:`check_model`), blamed on the option whose value
    caused it: one the class or the model refused (named by the class that owns it), an option value the class
    could not read, else a width it cannot use, or (a plug-in) any error of its own code."""
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


def check_hook_shapes(pe) -> None:
    """Each hook of the encoding ``pe`` (built for the run's network) keeps the shape it is given on the
    training grid, and gives finite values: a plug-in that drops or adds a token would train on shifted
    positions without a word, and one that gives nan would be blamed on ``optim.lr`` by the divergence guard.
    Raises :class:`ValueError` naming the hook (worded by :func:`refuse_network_error`)."""
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


def default_of(cls, option: str) -> str:
    """The fix for a bad value of ``option`` (``encoding.base``): the class's default for it."""
    leaf = option.rpartition(".")[2]
    try:
        return f"its default: {option}={cls.option_default(leaf)}"
    except KeyError:
        return f"{cls.name}'s options: {', '.join(cls.option_names())}"


def check_network(c: dict, image: bool, data_module, name: str, options: dict):
    """Build the run's network as training does (:func:`vitpos.models.network`) and run one training-size
    example through it, so constructors and hooks refuse what they cannot take. Returns the encoding module."""
    import torch

    from vitpos.models import network

    data = c["data"]
    sizes = (int(data.get("num_classes") or 10),) if image else (data_module.num_classes, data_module.input_vocab)
    check_model_memory(c, lambda blocks: network({**c, "model": {**c["model"], "depth": blocks}}, *sizes))
    model = network(c, *sizes).eval()  # (classes,) or (classes, vocabulary)
    if image:
        example = torch.zeros(1, 3, *as_hw(data["img_size"], "data.img_size"))  # (1, C, H, W)
    else:
        example = torch.zeros(1, data["train_len"], dtype=torch.long)  # (1, N) tokens
    with torch.no_grad():
        model(example)
    return model.pos


def check_timm(c: dict, name: str, options: dict):
    """``model=timm``: the encoding alone, built on the timm model's geometry (:func:`timm_geometry`) for the
    training grid, each hook run once there (:func:`check_hook_shapes`: lazily built tables check their widths
    there); then ``model.checkpoint`` (null: timm's initialisation), a readable state dict whose keys fit the
    model ``model.name`` makes for this data. Returns the encoding module."""
    from vitpos.encodings import EncodingContext, create_encoding
    from vitpos.integrations.timm_weights import create_vit, plan_checkpoint, read_checkpoint

    m, data = c["model"], c["data"]
    grid = patch_grid(data["img_size"], m["patch_size"], "data.img_size")
    ctx = EncodingContext(m["dim"], m["num_heads"], m["depth"], grid, int(m.get("num_prefix_tokens", 0)))
    pe = create_encoding(name, ctx, **options)
    check_hook_shapes(pe)
    if m.get("checkpoint") is not None:
        state = read_checkpoint(m["checkpoint"])
        model = create_vit(m, int(data.get("num_classes") or 1), data["img_size"], device="meta")
        plan_checkpoint(model, state, name, m["checkpoint"])
    return pe


def check_model_memory(c: dict, build) -> None:
    """Refuse a network whose training state does not fit in the memory free now, before the real one is
    built (a model of tens of GB would fill the machine in the check itself): weights, gradients and AdamW's
    two moments at 4 bytes each, and the EMA copy, on the CPU; the weights alone where a GPU trains (they are
    built on the CPU first). ``build(blocks)`` builds the network with ``blocks`` blocks: counted on the
    ``meta`` device with one and two blocks, and the difference times ``model.depth`` (a million blocks
    would fill the memory with their Python objects alone)."""
    import torch

    from vitpos.eval_memory import MEMORY_FRACTION
    from vitpos.runtime import available_memory, uses_cuda

    try:
        with torch.device("meta"):
            one, two = (sum(p.numel() for p in build(blocks).parameters()) for blocks in (1, 2))
        params = one + (int(c["model"]["depth"]) - 1) * (two - one)
    except Exception:  # noqa: BLE001 (a constructor that needs real values: the real build says what is wrong)
        return
    gpu = uses_cuda(c["trainer"]["accelerator"])
    per_param = 4 if gpu else 16 + 4 * bool((c.get("task") or {}).get("ema_decay"))
    need, free = params * per_param, available_memory()
    if need > MEMORY_FRACTION * free:
        raise UserError(
            "model",
            f"{params:,} parameters need about {need / 2**30:.1f} GiB to train here, more than "
            f"{MEMORY_FRACTION:.0%} of the {free / 2**30:.1f} GiB free",
            "a smaller model.dim, model.depth, data.vocab_size or data.num_classes",
        )


def check_plugin(name, module, load: bool = True) -> None:
    """``encoding=plugin``: both ``encoding.module`` and ``encoding.name`` are given and the module imports
    (a missing file or the plug-in's own error becomes one line). ``load=False``: only that both are
    given and the module can be found, without importing it."""
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


def timm_geometry(c: dict, image: bool) -> dict:
    """``c["model"]`` (a timm model's) with its ``patch_size``, ``dim``, ``num_heads``, ``depth`` and
    ``num_prefix_tokens`` filled in; a :class:`UserError` for a model vitpos cannot convert."""
    m = c["model"]
    if not image:
        raise UserError("model", "model=timm is an image model", "task=classification, or model=seq_small")
    if not isinstance(m.get("name"), str) or not m["name"]:
        raise UserError(
            "model.name", f"must name a timm model, got {m.get('name')!r}", "model.name=vit_tiny_patch16_224"
        )
    if not isinstance(m.get("kwargs") or {}, dict):
        raise UserError("model.kwargs", f"must be a mapping, got {m.get('kwargs')!r}", "model.kwargs={depth:6}")
    from vitpos.integrations.timm_weights import create_vit, geometry

    return {**m, **geometry(create_vit(m, int(c["data"].get("num_classes") or 1), None, device="meta"))}
