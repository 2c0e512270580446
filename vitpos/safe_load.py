"""Reading a PyTorch file without running code from it: the one loader behind ``ckpt=``,
``resume=`` and ``model.checkpoint``.

``torch.load(..., weights_only=False)`` unpickles arbitrary objects, so a crafted file can run
any command on the machine that opens it; :func:`load_weights_only` always loads with
``weights_only=True`` (PyTorch's restricted unpickler). What that unpickler refuses is not always
a crafted file, and torch's own message says neither which case it is nor anything safe to do (it
advises ``weights_only=False``, for a crafted file the one unsafe act). So every way a file fails
becomes one :class:`NotLoadable` that says what the file is:

- not a PyTorch file at all (empty, text, another format), or a plain ``pickle.dump`` of any
  object, even a harmless one: told apart from ``torch.save``'s formats by their first bytes
  (a zip archive, or a pickle of torch's magic number), before torch reads it;
- a file that names Python objects only an unrestricted unpickler would build (``GLOBAL
  posix.system``): crafted or foreign (:attr:`NotLoadable.crafted`);
- a PyTorch file whose pickle uses an opcode the restricted unpickler does not implement
  (``torch.save(..., pickle_protocol=4)``): named by the opcode and its protocol;
- a truncated or corrupt file.

torch's warning about a pickle protocol other than 2 is not printed: the one line says it.
The callers put the option and what to pass instead in front and behind
(:func:`vitpos.run.checkpoint.load_checkpoint`, :func:`vitpos.integrations.timm_weights.read_checkpoint`).
"""

from __future__ import annotations

import pickle
import pickletools
import re
import warnings
from pathlib import Path

import torch

#: the first bytes of torch.save's two formats: a zip archive, or (the legacy format) a pickle of
#: torch's magic number in any protocol that starts with a PROTO opcode
ZIP_HEAD = b"PK\x03\x04"
LEGACY_HEADS = tuple(pickle.dumps(torch.serialization.MAGIC_NUMBER, protocol=p) for p in range(2, 6))


class NotLoadable(ValueError):
    """Why a file cannot be loaded with ``weights_only=True``, as one clause (``str(err)``).
    ``crafted``: it names objects only an unrestricted unpickler builds, so loading it without
    ``weights_only`` is what would run its code."""

    def __init__(self, what: str, crafted: bool = False):
        super().__init__(what)
        self.crafted = crafted


def load_weights_only(path: str | Path):
    """``torch.load(path, map_location="cpu", weights_only=True)``; raises :class:`NotLoadable`
    (never runs code from the file, prints no warning of torch's) when the file cannot give it."""
    try:
        with open(path, "rb") as f:
            head = f.read(max(map(len, LEGACY_HEADS)))
    except OSError as err:  # a folder, no permission: the callers check existence first
        raise NotLoadable(f"cannot be read: {err.strerror or one_line(err)}") from None
    if not head.startswith(ZIP_HEAD) and not head.startswith(LEGACY_HEADS):
        if head[:1] == pickle.PROTO:  # the first opcode of a pickle of protocol 2 or later
            raise NotLoadable("not a PyTorch checkpoint: a plain pickle, which the safe loader does not read")
        raise NotLoadable(f"not a checkpoint ({'not a PyTorch file' if head else 'an empty file'})")
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise refusal(err) from None
    except (RuntimeError, EOFError, OSError, ValueError) as err:
        raise NotLoadable(f"not a readable checkpoint (truncated or corrupt?): {one_line(err)}") from None


def refusal(err: pickle.UnpicklingError) -> NotLoadable:
    """What torch's restricted unpickler refused, without torch's advice to rerun with
    ``weights_only=False``: an object it will not build (a crafted or foreign file), an opcode it
    does not read (a newer pickle protocol), or another refusal, quoted."""
    text = one_line(err)
    found = re.search(r"GLOBAL [\w.]+", text)
    if found:
        return NotLoadable(
            f"refused: it holds Python objects that only an unrestricted unpickler would build ({found.group(0)}), "
            "and building them can run any code",
            crafted=True,
        )
    found = re.search(r"Unsupported operand (\d+)", text)
    if found:
        op = pickletools.code2op.get(chr(int(found.group(1))))
        opcode = f"{op.name} (pickle protocol {op.proto})" if op else f"number {found.group(1)}"
        return NotLoadable(f"a PyTorch file whose pickle uses the opcode {opcode}, which the safe loader does not read")
    quoted = re.search(r"WeightsUnpickler error: (.*?)(?: Check the documentation|$)", text)
    # without that marker: torch's text less its sentences about weights_only
    reason = quoted.group(1) if quoted else ". ".join(s for s in text.split(". ") if "weights_only" not in s)
    return NotLoadable(f"refused by the safe loader: {reason}")


def one_line(err: BaseException) -> str:
    """``err``'s message with its line breaks and runs of spaces as single spaces."""
    return " ".join(str(err).split())
