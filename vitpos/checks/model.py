"""Checks of the model: ``encoding.*`` (name, strategy, options), then the run's network built with it and one
example run through it, so encoding classes and model constructors stay the one owner of their rules.

``model=timm``: :func:`with_timm_geometry` fills in the model's geometry from timm (built on ``meta``: shapes,
no memory); :func:`check_timm_checkpoint` refuses a key whose shape does not fit, by the rule the task loads it
with (:func:`vitpos.integrations.timm_weights.plan_checkpoint`). torch is imported inside the functions.
"""

from __future__ import annotations

import math
import re
import sys

from vitpos.errors import UserError
from vitpos.integrations import is_timm
from vitpos.sizes import as_hw, token_grid


def encoding_names() -> str:
    """The registered encodings, image ones then sequence ones: the hint of an unknown name."""
    from vitpos.encodings import list_encodings

    plugins = [n for n in list_encodings(plugins=True) if n not in list_encodings()]
    also = f"; plug-ins: {', '.join(plugins)}" if plugins else ""
    return f"image: {', '.join(list_encodings(2))}; sequence: {', '.join(list_encodings(1))}{also}"


def check_encoding(c: dict, image: bool, plugins: bool = True) -> None:
    """Name, strategy and options of ``encoding``, then the run's network built with it
    (:func:`check_network`: the constructors check widths and head dims). ``plugins=False``: a
    plug-in's module is not imported, so only its name and module are checked."""
    from vitpos.encodings import OptionError, get_encoding_class
    from vitpos.encodings.plugins import is_builtin

    enc = dict(c["encoding"])
    name, module = enc.pop("name", None), enc.pop("module", None)
    if module is not None or name is None:
        check_plugin(name, module, load=plugins)
        if not plugins:
            return
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
        pe = check_network(c, image, name, enc)
        if not is_builtin(cls):
            check_hook_shapes(pe)
    except UserError:  # the network's memory (check_model_memory)
        raise
    except Exception as err:
        if is_builtin(cls) and not isinstance(err, OptionError | ValueError | TypeError | KeyError | RuntimeError):
            raise
        refuse_network_error(c, cls, err)


def refuse_network_error(c: dict, cls, err: Exception) -> None:
    """The one line for an error of the network check (:func:`check_encoding`): an option the class
    refused, a width it cannot use, or (a plug-in) any error of its own code."""
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


def check_network(c: dict, image: bool, name: str, options: dict):
    """Build the run's network as training does (:func:`vitpos.models.network`) and run one training-size
    example through it, so constructors and hooks refuse what they cannot take. For a timm model, only the
    encoding is built, on the timm model's geometry, and each hook runs once on the training grid (lazily
    built tables check their widths there). Returns the encoding module it built."""
    import torch

    from vitpos.encodings import EncodingContext, create_encoding
    from vitpos.models.attention import check_heads

    m = c["model"]
    if is_timm(m):
        check_heads(m["dim"], m["num_heads"])
        grid = token_grid(c["data"]["img_size"], m["patch_size"])
        ctx = EncodingContext(m["dim"], m["num_heads"], m["depth"], grid, int(m.get("num_prefix_tokens", 0)))
        pe, n, prefix = create_encoding(str(name), ctx, **options), math.prod(grid), ctx.num_prefix_tokens
        with torch.no_grad():
            pe.add_to_tokens(torch.zeros(1, n, ctx.dim), grid)  # (B, N, D)
            q = torch.zeros(1, ctx.num_heads, prefix + n, ctx.head_dim)  # (B, H, P + N, Dh)
            pe.after_block(torch.zeros(1, prefix + n, ctx.dim), grid, 0)  # (B, P + N, D)
            pe.rotate_qk(q, q, grid, 0)
            pe.attention_bias(grid, 0, torch.device("cpu"), torch.float32)
        return pe
    from vitpos.data.sequence import task_sizes
    from vitpos.models import network

    data = c["data"]
    if image:
        sizes = (int(data.get("num_classes") or 10),)  # (classes,) or (classes, vocabulary)
        example = torch.zeros(1, 3, *as_hw(data["img_size"], "data.img_size"))  # (1, C, H, W)
    else:
        sizes = task_sizes(data["task"], data["vocab_size"], data["probe_classes"])[::-1]
        example = torch.zeros(1, data["train_len"], dtype=torch.long)  # (1, N) tokens
    check_model_memory(c, lambda blocks: network({**c, "model": {**m, "depth": blocks}}, *sizes))
    model = network(c, *sizes).eval()
    with torch.no_grad():
        model(example)
    return model.pos


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


def with_timm_geometry(c: dict, image: bool) -> dict:
    """``c["model"]`` with a timm model's ``patch_size``, ``dim``, ``num_heads``, ``depth`` and
    ``num_prefix_tokens`` filled in; a :class:`UserError` for a model vitpos cannot convert."""
    m = c["model"]
    if not is_timm(m):
        return m
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


def check_timm_checkpoint(c: dict) -> None:
    """``model.checkpoint`` (null: timm's initialisation): a readable state dict whose keys fit
    the model ``model.name`` makes for this data (after :func:`with_timm_geometry`)."""
    m = c["model"]
    if not is_timm(m) or m.get("checkpoint") is None:
        return
    from vitpos.integrations.timm_weights import create_vit, plan_checkpoint, read_checkpoint

    state = read_checkpoint(m["checkpoint"])
    model = create_vit(m, int(c["data"].get("num_classes") or 1), c["data"]["img_size"], device="meta")
    plan_checkpoint(model, state, str((c.get("encoding") or {}).get("name")), m["checkpoint"])
