"""Checks of the model: ``encoding.*`` (name, strategy, options), then the run's network built with it and one
example run through it, so encoding classes and model constructors stay the one owner of their rules.

``model=timm``: :func:`with_timm_geometry` fills in the model's geometry from timm (built on ``meta``: shapes,
no memory); :func:`check_timm_checkpoint` refuses a key whose shape does not fit, by the rule the task loads it
with (:func:`vitpos.integrations.timm_weights.plan_checkpoint`). torch is imported inside the functions.
"""

from __future__ import annotations

import math

from vitpos.errors import UserError
from vitpos.integrations import is_timm
from vitpos.sizes import as_hw, token_grid


def encoding_names() -> str:
    """The registered encodings, image ones then sequence ones: the hint of an unknown name."""
    from vitpos.encodings import list_encodings

    return f"image: {', '.join(list_encodings(2))}; sequence: {', '.join(list_encodings(1))}"


def check_encoding(c: dict, image: bool) -> None:
    """Name, strategy and options of ``encoding``, then the run's network built with it
    (:func:`check_network`: the constructors check widths and head dims)."""
    from vitpos.encodings import OptionError, get_encoding_class

    enc = dict(c["encoding"])
    name, module = enc.pop("name", None), enc.pop("module", None)
    if module is not None or name is None:
        check_plugin(name, module)
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
        check_network(c, image, name, enc)
    except UserError:  # the network's memory (check_model_memory)
        raise
    except OptionError as err:  # an unknown option, a bad value or strategy: named by the class that owns the rule
        fix = err.fix or default_of(cls, err.option)
        raise UserError(err.option, err.args[0].rstrip("."), fix) from None
    except (ValueError, TypeError, KeyError, RuntimeError) as err:
        m = c["model"]
        message = str(err.args[0] if isinstance(err, KeyError) else err)
        raise UserError("encoding", message.rstrip("."), f"model: dim {m['dim']}, {m['num_heads']} heads") from None


def default_of(cls, option: str) -> str:
    """The fix for a bad value of ``option`` (``encoding.base``): the class's default for it."""
    leaf = option.rpartition(".")[2]
    try:
        return f"its default: {option}={cls.option_default(leaf)}"
    except KeyError:
        return f"{cls.name}'s options: {', '.join(cls.option_names())}"


def check_network(c: dict, image: bool, name: str, options: dict) -> None:
    """Build the run's network as training does (:func:`vitpos.models.network`) and run one training-size
    example through it, so constructors and hooks refuse what they cannot take. For a timm model, only the
    encoding is built, on the timm model's geometry, and each hook runs once on the training grid (lazily
    built tables check their widths there)."""
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
        return
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
    with torch.no_grad():
        network(c, *sizes).eval()(example)


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


def check_plugin(name, module) -> None:
    """``encoding=plugin``: both ``encoding.module`` and ``encoding.name`` are given and the module imports
    (a missing file or the plug-in's own error becomes one line)."""
    from vitpos.encodings.plugins import load_module

    if not module or not name:
        raise UserError(
            "encoding.module" if not module else "encoding.name",
            "an encoding of your own needs its file and its registered name",
            "encoding=plugin encoding.module=<file.py or module> encoding.name=<name>",
        )
    try:
        load_module(str(module))
    except ImportError as err:  # ModuleNotFoundError: no such file or module
        raise UserError("encoding.module", str(err).removeprefix(f"encoding.module={module}: "),
                        "give a .py file or an importable module name") from None  # fmt: skip
    except Exception as err:  # the plug-in's own code failed: say where, in one line
        raise UserError("encoding.module", f"{module} failed to import: {type(err).__name__}: {err}",
                        "fix the file, then run again") from None  # fmt: skip


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
