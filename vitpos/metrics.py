"""The names of the scores beyond the training size, written and read in one place.

An accuracy at another size is ``test/acc@res48``, ``test/acc@res16x32`` (height x width),
``test/acc@res48up`` (upsampled: a larger token grid, no new detail) or ``test/acc@len256``, with
``/<strategy>`` appended for a strategy other than the encoding's default; its loss is the same
name with ``test/loss@``. :func:`metric_name` writes such a name (the evaluation loop of
:mod:`vitpos.extrapolate`, the leaderboard's columns) and :func:`parse_metric` reads one (the
training log's table, the reports of :mod:`vitpos.compare`, the doc tables); no other module builds
or parses these names. It imports only :mod:`vitpos.sizes`, so every layer may use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vitpos.sizes import parse_name, size_name

#: the statistics recorded at each size
STATS = ("acc", "loss")
#: ``res``: an image resolution (a side, or ``HxW``); ``len``: a sequence length
KINDS = ("res", "len")
#: the tag suffix of sizes above the native resolution (on either axis): ``test/acc@res48up``
UPSAMPLED = "up"

#: groups: stat, kind, size (its name), "up", strategy
_NAME = re.compile(r"^test/(acc|loss)@(res|len)(\d+(?:x\d+)?)(up)?(?:/(.+))?$")


@dataclass(frozen=True)
class BeyondSize:
    """What a name such as ``test/acc@res16x32up/ntk`` says."""

    stat: str  #: ``acc`` or ``loss``
    kind: str  #: ``res`` or ``len``
    size: str  #: as the name writes it: ``48``, ``16x32`` (:func:`vitpos.sizes.parse_name` reads it)
    upsampled: bool
    strategy: str | None  #: None: the encoding's default strategy

    @property
    def name(self) -> str:
        """The metric name again (:func:`metric_name` of these fields)."""
        resampling = "upsampled" if self.upsampled else "native"
        return metric_name(self.kind, self.size, self.strategy, resampling=resampling, stat=self.stat)


def metric_name(
    kind: str,
    size,
    strategy: str | None = None,
    default: str | None = None,
    resampling: str = "native",
    stat: str = "acc",
) -> str:
    """``test/acc@res48``, ``test/acc@res16x32`` (height x width), ``test/acc@res48up`` (``resampling``
    is ``upsampled``), ``test/acc@len256``; ``/<strategy>`` appended for a strategy other than the
    ``default`` (None and None: no suffix); ``stat="loss"``: ``test/loss@...``. ``size``: a side, an
    ``(h, w)`` pair or a size name (``"16x32"``) for images, a length for sequences."""
    if stat not in STATS or kind not in KINDS:
        raise ValueError(f"no metric {stat!r} of kind {kind!r}: the stat is one of {STATS}, the kind one of {KINDS}")
    if kind == "res":
        where = size_name(parse_name(size) if isinstance(size, str) else size)
    else:
        where = str(size)
    name = f"test/{stat}@{kind}{where}" + (UPSAMPLED if resampling == "upsampled" else "")
    return name if strategy == default else f"{name}/{strategy}"


def parse_metric(name: str) -> BeyondSize | None:
    """What a name of :func:`metric_name` says, or None for any other name (``test/acc``,
    ``val/acc_best``, a column such as ``test/acc@res32_mean``: strip the suffix first)."""
    m = _NAME.match(name)
    if m is None:
        return None
    stat, kind, size, up, strategy = m.groups()
    return BeyondSize(stat, kind, size, bool(up), strategy)
