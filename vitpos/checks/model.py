"""The model: ``encoding.*`` (name, strategy, options), then the run's own network built with it and
one example run through it, so each encoding's class and each model's constructor stay the one
place their rules (options, value ranges, strategies and aliases, widths, head dims) are written.

``model=timm``: ``model.name``, ``model.kwargs`` and ``model.checkpoint``. A timm model's patch
size, width, heads and depth come from the model itself: :func:`with_timm_geometry` reads them
(:func:`vitpos.integrations.timm_weights.geometry`) from the model built on the ``meta`` device
(shapes, no memory) and fills them into the config's ``model`` section that the size, memory and
encoding checks read. :func:`check_timm_checkpoint` reads the file and refuses a key whose shape
does not fit, by the same rule the task loads it with
(:func:`vitpos.integrations.timm_weights.plan_checkpoint`).

torch is imported inside the functions: the plain checks that run before these refuse a bad
option without loading it.
"""

from __future__ import annotations

import math

from vitpos.errors import UserError
from vitpos.integrations import is_timm
from vitpos.sizes import as_hw


def encoding_names(image: bool = True) -> str:
    """The registered encodings, image ones then sequence ones: the hint of an unknown name."""
    from vitpos.encodings import list_encodings

    img, seq = list_encodings(2), list_encodings(1)
    return f"image: {', '.join(img)}; sequence: {', '.join(seq)}"


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
        raise UserError("encoding.name", f"unknown encoding {name!r}", encoding_names(image)) from None
    dims = 2 if image else 1
    if dims not in cls.grid_dims:
        raise UserError(
            "encoding",
            f"'{name}' is for {'sequences' if image else 'images'}, this is an {'image' if image else 'sequence'} task",
            encoding_names(image),
        )
    params = cls.option_names()
    unknown = sorted(set(enc) - set(params))
    if unknown:
        raise UserError(
            f"encoding.{unknown[0]}", f"'{name}' takes no option '{unknown[0]}'", f"valid options: {', '.join(params)}"
        )
    strategy = enc.get("strategy")
    if strategy is not None and name != "combo":
        if strategy not in cls.valid_strategies():  # the class declares its strategies and aliases
            raise UserError(
                "encoding.strategy", f"'{name}' has no strategy {strategy!r}", f"valid: {', '.join(cls.strategies)}"
            )
    try:
        check_network(c, image, name, enc)
    except OptionError as err:  # a bad value of one option, named by the class that owns the rule
        fix = err.fix or f"configs/encoding/{name}.yaml has the defaults"
        raise UserError(err.option, str(err).rstrip("."), fix) from None
    except (ValueError, TypeError, KeyError, RuntimeError) as err:
        m = c["model"]
        message = str(err.args[0] if isinstance(err, KeyError) else err)
        raise UserError("encoding", message.rstrip("."), f"model: dim {m['dim']}, {m['num_heads']} heads") from None


def check_network(c: dict, image: bool, name: str, options: dict) -> None:
    """Build the run's own network as training builds it (:func:`vitpos.models.network`) and
    run one example of the training size through it: the model's and the encoding's constructors
    and hooks refuse what they cannot take (head widths, grids, tables built on first use). A timm
    model (built on the ``meta`` device by :func:`with_timm_geometry`) has its encoding built
    on the timm model's geometry and its hooks run once."""
    import torch

    from vitpos.encodings import EncodingContext, create_encoding
    from vitpos.integrations import is_timm
    from vitpos.models.attention import check_heads

    m = c["model"]
    if is_timm(m):
        check_heads(m["dim"], m["num_heads"])
        h, w = as_hw(c["data"]["img_size"], "data.img_size")
        grid = (h // m["patch_size"], w // m["patch_size"])
        ctx = EncodingContext(m["dim"], m["num_heads"], m["depth"], grid, int(m.get("num_prefix_tokens", 0)))
        return exercise(create_encoding(str(name), ctx, **options), ctx)
    from vitpos.data.sequence import task_sizes
    from vitpos.models import network

    data = c["data"]
    if image:
        model = network(c, int(data.get("num_classes") or 10))
        example = torch.zeros(1, 3, *as_hw(data["img_size"], "data.img_size"))  # (1, C, H, W)
    else:
        vocab, classes = task_sizes(data["task"], data.get("vocab_size", 16), data.get("probe_classes", 512))
        model = network(c, classes, vocab)
        example = torch.zeros(1, data["train_len"], dtype=torch.long)  # (1, N) tokens
    with torch.no_grad():
        model.eval()(example)


def check_plugin(name, module) -> None:
    """``encoding=plugin``: both ``encoding.module`` and ``encoding.name`` given, and the module
    imports (a missing file, or the plug-in's own error, in one line)."""
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


def exercise(pe, ctx) -> None:
    """Run every hook once on the training grid: encodings that build their
    tables lazily check their widths there, not in the constructor."""
    import torch

    n = math.prod(ctx.grid)
    with torch.no_grad():
        pe.add_to_tokens(torch.zeros(1, n, ctx.dim), ctx.grid)  # (B, N, D)
        q = torch.zeros(1, ctx.num_heads, ctx.num_prefix_tokens + n, ctx.head_dim)  # (B, H, P + N, Dh)
        pe.after_block(torch.zeros(1, ctx.num_prefix_tokens + n, ctx.dim), ctx.grid, 0)  # (B, P + N, D)
        pe.rotate_qk(q, q, ctx.grid, 0)
        pe.attention_bias(ctx.grid, 0, torch.device("cpu"), torch.float32)


def with_timm_geometry(c: dict, image: bool) -> dict:
    """``c["model"]``, with a timm model's ``patch_size``, ``dim``, ``num_heads``, ``depth`` and
    ``num_prefix_tokens`` filled in; a :class:`UserError` naming ``model.name`` (or
    ``model.kwargs``) for a model that is not a timm ViT vitpos can convert."""
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

    model = create_vit(m, int(c["data"].get("num_classes") or 1), None, device="meta")
    return {**m, **geometry(model)}


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
