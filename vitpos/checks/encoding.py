"""``encoding.*``: the name, strategy and options of the encoding, then the encoding built on the
model's real geometry, so each encoding's own class stays the one place its rules (options,
value ranges, strategies and aliases, widths, head dims) are written.

The encodings (and so torch) are imported inside the functions: the plain checks that run
before these refuse a bad option without loading torch."""

from __future__ import annotations

import math

from vitpos.errors import UserError
from vitpos.sizes import as_hw


def encoding_names(image: bool = True) -> str:
    """The registered encodings, image ones then sequence ones: the hint of an unknown name."""
    from vitpos.encodings import list_encodings

    img, seq = list_encodings(2), list_encodings(1)
    return f"image: {', '.join(img)}; sequence: {', '.join(seq)}"


def check_encoding(c: dict, image: bool) -> None:
    """Name, strategy and options of ``encoding``, then the encoding built on the
    model's geometry (its constructor checks widths and head dims)."""
    from vitpos.encodings import EncodingContext, OptionError, create_encoding, get_encoding_class

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
    m = c["model"]
    if image:
        h, w = as_hw(c["data"]["img_size"], "data.img_size")
        prefix = int(m.get("num_prefix_tokens", m.get("pool") == "cls"))  # a timm model's (checks/timm_model.py)
        grid = (h // m["patch_size"], w // m["patch_size"])
    else:
        grid, prefix = (c["data"]["train_len"],), 0
    if m.get("num_heads", 0) < 1 or m.get("dim", 0) % max(1, m.get("num_heads", 1)):
        raise UserError(
            "model.dim",
            f"{m.get('dim')} is not a multiple of model.num_heads={m.get('num_heads')}",
            "change model.dim or model.num_heads",
        )
    ctx = EncodingContext(m["dim"], m["num_heads"], m["depth"], grid, prefix)
    try:
        exercise(create_encoding(str(name), ctx, **enc), ctx)
    except OptionError as err:  # a bad value of one option: the encoding names it (encoding.base, ...)
        raise UserError(err.option, str(err).rstrip("."), f"configs/encoding/{name}.yaml has the defaults") from None
    except (ValueError, TypeError, KeyError, RuntimeError) as err:
        message = str(err.args[0] if isinstance(err, KeyError) else err)
        raise UserError("encoding", message.rstrip("."), f"model: dim {m['dim']}, {m['num_heads']} heads") from None


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
