"""The rule kinds of the options schema and :func:`option`, the one field helper of the config schemas and of the
tools' ``key=value`` options (:mod:`vitpos.cli.options`). A field's metadata holds its ``help`` and its ``rule``
(kind, bounds, part in the run's identity); :func:`rules` gathers them into :data:`vitpos.config.OPTIONS`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING

from vitpos.errors import UserError
from vitpos.sizes import is_integer

IMAGE, SEQUENCE = "image", "sequence"


@dataclass(kw_only=True)
class Spec:
    """What every rule says besides its bounds; ``defines`` and ``as_before`` set the option's part in the run's
    identity (:mod:`vitpos.run.identity`, :mod:`vitpos.run.hashed_keys`)."""

    task: str | None = None  # IMAGE or SEQUENCE; None: every task
    fix: str | None = None  # default: e.g. <option>=<example>
    items: bool = False  # a list of such values, each checked and named option[i]
    length: int | None = None  # items: exactly this many
    unless: str | None = None  # an option that, when set, makes this one unused (trainer.fast_dev_run)
    help: str = ""  # one line of --help
    defines: bool = True  # False: changes how a run is shown or how fast it goes, not what it learns (not hashed)
    as_before: tuple = ()  # at these values the option is left out of the hash, so older folders still match

    def rule(self) -> str:
        return self.noun

    def fits(self, value) -> bool:  # each kind's own rule; Given: another check owns it
        return True

    def problem(self, value) -> str | None:
        if value is None and getattr(self, "null", False):
            return None
        return None if self.fits(value) else f"must be {self.rule()}, got {value!r}"


@dataclass
class Int(Spec):
    """An integer ``>= minimum`` (``<= maximum``); ``null``: None allowed too."""

    noun, plural, sample = "an integer", "integers", "4"  # a typed tool option's wording (vitpos.cli.options)
    example: int | str
    minimum: int = 1
    null: bool = False
    maximum: int | None = None
    also: tuple[int, ...] = ()  # values below the minimum that mean something (joblib's n_jobs=-1: every core)

    def rule(self) -> str:
        most = f" and <= {self.maximum}" if self.maximum is not None else ""
        other = "".join(f" (or {v})" for v in self.also)
        return f"{self.noun} >= {self.minimum}{most}{other}{' (or null)' if self.null else ''}"

    def fits(self, value) -> bool:
        bounded = is_integer(value) and value >= self.minimum and (self.maximum is None or value <= self.maximum)
        return (is_integer(value) and value in self.also) or bounded


@dataclass
class Number(Spec):
    """A finite number ``>= low`` (``above``: ``> low``), or in ``[low, below)``; ``null``: None allowed."""

    noun, plural, sample = "a number", "numbers", "0.5"
    example: float | str
    low: float = 0
    above: bool = False
    below: float | None = None
    null: bool = True

    def rule(self) -> str:
        if self.below is not None:
            return f"in [{self.low}, {self.below})"
        return f"a finite number {'>' if self.above else '>='} {self.low}"

    def fits(self, value) -> bool:
        low = value > self.low if self.above else value >= self.low
        return self.low <= value < self.below if self.below is not None else math.isfinite(value) and low

    def problem(self, value) -> str | None:
        if (value is not None or not self.null) and (not isinstance(value, (int, float)) or isinstance(value, bool)):
            return f"expected {self.noun}, got {value!r}"
        return super().problem(value)


@dataclass
class Flag(Spec):
    """``true`` or ``false`` only: YAML and Hydra read ``yes``, ``on`` or ``"false"`` as text, which Python
    counts as true, and ``0``/``1`` as integers."""

    noun, sample = "true or false", "true"
    example: str = "true"

    def fits(self, value) -> bool:
        return isinstance(value, bool)


@dataclass
class Given(Spec):
    """An option whose rule reads more than its own value, so another check owns it (every value fits here);
    declared for its help and its part in the run's identity. ``noun``: its rule, in words."""

    noun: str
    example: str = ""


def option(default: Any = MISSING, help: str = "", rule: Spec | None = None, *, metavar: str | None = None,  # noqa: A002
           **meta) -> Any:  # fmt: skip
    """A dataclass field; metadata: ``help`` (given: the rule's too), ``rule``, and for a tool ``metavar``,
    ``required`` (no default), ``repeat`` (``key=a key=b``: ``[a, b]``), ``words`` (a list bare words fill, like a
    subcommand), ``choices``, ``default_text``, ``example``."""
    if rule is not None and help:
        rule.help = help  # --help reads the rule's
    meta = {"help": help or (rule.help if rule else ""), "metavar": metavar, "rule": rule, **meta}
    if default is MISSING:
        meta["required"] = True
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def rules(schemas: Iterable[tuple[str, type]]) -> dict[str, Spec]:
    """``dotted name -> rule`` of the ``(section, dataclass)`` pairs' fields (section ``""``: top-level keys); a name
    several schemas hold keeps its first rule."""
    found: dict[str, Spec] = {}
    for section, schema in schemas:
        for f in dataclasses.fields(schema):
            if f.metadata.get("rule") is not None:
                found.setdefault(f"{section}.{f.name}" if section else f.name, f.metadata["rule"])
    return found


#: (group, option) -> its schema, filled by ``@schema(group, option)``: ``configs/<group>/<option>.yaml`` starts
#: from it (``eval``: no group, a task's recipe places it)
SCHEMAS: dict[tuple[str, str], type] = {}


def schema(cls: type | str, option: str | None = None):
    """``@dataclass``, where a field a subclass redeclares with a plain default keeps its base's metadata (rule,
    help): each rule is attached once. ``@schema(group, option)`` also enters the class in :data:`SCHEMAS`."""
    if isinstance(cls, str):
        return lambda c: SCHEMAS.setdefault((cls, option), schema(c))
    cls = dataclass(cls)
    for f in dataclasses.fields(cls):
        base = next((b.__dataclass_fields__.get(f.name) for b in cls.__mro__[1:] if dataclasses.is_dataclass(b)), None)
        if base is not None and not f.metadata:
            f.metadata = base.metadata
    return cls


def variant(base: type, group: str, option: str, **changed) -> type:
    """The schema of ``group/option``: ``base`` with the defaults in ``changed`` (as a config file sets only what
    differs); each field keeps its base's rule and help."""
    name = "".join(word.title() for word in option.split("_"))
    namespace = {"__annotations__": dict.fromkeys(changed, Any), "__module__": base.__module__, **changed}
    return schema(group, option)(type(name, (base,), namespace))


def describe(spec: Spec) -> str:
    """The rule of ``spec`` as ``--help`` shows it: ``an integer >= 1``, ``a list of 2, each in [0, 1)``."""
    rule = spec.rule() + (" (or null)" if isinstance(spec, Number) and spec.null else "")
    return f"a list{f' of {spec.length}' if spec.length else ''}, each {rule}" if spec.items else rule


def check_value(option: str, spec: Spec, value) -> None:
    """Raise :class:`UserError` when ``value`` does not fit ``spec`` (``items``: null, or a list whose items do)."""
    fix = spec.fix or f"e.g. {option}={spec.example}"
    if spec.items and value is None:
        return
    if spec.items and not isinstance(value, list):
        raise UserError(option, f"must be a list, got {value!r}", fix)
    named = {f"{option}[{i}]": v for i, v in enumerate(value)} if spec.items else {option: value}
    for name, item in named.items():
        if problem := spec.problem(item):
            raise UserError(name, problem, fix)
    if spec.items and spec.length is not None and len(value) != spec.length:
        raise UserError(option, f"must be a list of {spec.length}, got {len(value)}: {value!r}", fix)


ABSENT = object()  # an option the config does not have (this data set or task has none): not checked


def lookup(c: dict, option: str):
    """The value of the dotted ``option`` in the plain config ``c``, or :data:`ABSENT`."""
    node = c
    for key in option.split("."):
        if not isinstance(node, dict) or key not in node:
            return ABSENT
        node = node[key]
    return node


def check_options(c: dict, task: str, specs: dict[str, Spec]) -> None:
    """Check every option of ``specs`` that ``task`` uses in the plain config ``c``, unless its ``unless`` is set."""
    for option, spec in specs.items():
        value = lookup(c, option)
        exempt = ABSENT if spec.unless is None else lookup(c, spec.unless)
        if value is not ABSENT and spec.task in (None, task) and (exempt is ABSENT or not exempt):
            check_value(option, spec, value)
