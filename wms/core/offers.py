"""Grid Engine's three levels and what each offers (complex(5) "Overriding
attributes"; specs/000 section 3).

The global level (the whole system), the host (a pilot's worker node, or a
host cluster.yaml configures) and the queue (one Site/CE/Queue) each offer
values of complex attributes; a request is judged against them strictly
global -> host -> queue. This module holds that judgement, which the
Matcher's level layers (core/match/levels.py) and the grant of an advance
reservation (core/reservations/grant.py) share: the levels' values, the
offer of one level after overriding, the first level that falls short,
and what a job is charged. It sits below both, so neither imports the
other's folder for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from wms.core.complexes import (
    LOWER_BOUND_RELOPS,
    STRING_TYPES,
    Complex,
    ComplexTable,
    Consumable,
    Relop,
    Requestable,
    ValueType,
    default_value,
    format_value,
    numeric_value,
    satisfies,
)
from wms.core.errors import InvalidInput
from wms.core.reasons import Reason

GLOBAL, HOST, QUEUE = "global", "host", "queue"
LEVEL_ORDER = (GLOBAL, HOST, QUEUE)
SOURCES = ("fixed", "load", "capacity")

#: The load values a pilot measures on its node and sends with every
#: request (pilot/probe.py, ``Node.load``).
PILOT_LOAD_VALUES = frozenset({
    "num_proc", "mem_total", "mem_free", "swap_total", "arch", "load_avg", "np_load_avg",
})

# Queue resource limits (queue_conf(5)): a queue that does not set one offers
# no limit, so requesting it never fails for want of a definition.
UNLIMITED_BY_DEFAULT = frozenset({
    "h_rt", "s_rt", "h_cpu", "s_cpu", "h_vmem", "s_vmem", "h_fsize", "s_fsize", "h_data", "s_data",
    "h_stack", "s_stack", "h_core", "s_core", "h_rss", "s_rss",
})

# What a pilot's host describes at every request (its load values,
# PILOT_LOAD_VALUES, its hostname, free slots and CPU time left):
# where no configured level offers one of these, a pilot's host still may.
# A name outside this set that no configured level offers can be offered
# by no host either.
PILOT_REPORTED = PILOT_LOAD_VALUES | {"hostname", "slots", "h_rt"}


@dataclass(frozen=True)
class LevelValues:
    """One Grid Engine level as a pilot request sees it.

    ``fixed`` are configured values (capacities of consumables included),
    ``load`` the values the pilot measured (host level only), ``scope`` the
    usage row key when the level's consumables are accounted.
    """

    level: str
    fixed: Mapping[str, Any]
    load: Mapping[str, Any] = field(default_factory=dict)
    scope: str | None = None


_SOURCE_WORDS = {"fixed": "configured value", "load": "load value", "capacity": "free capacity"}


@dataclass(frozen=True, slots=True)
class Offer:
    """What one level offers for one attribute: ``level`` is global, host
    or queue; ``source`` says where the value came from: a configured
    complex_values entry (fixed), a measured load value (load) or what is
    left of a consumable (capacity).
    """

    level: str
    value: Any
    source: str = "fixed"

    def __post_init__(self) -> None:
        if self.level not in LEVEL_ORDER:
            raise InvalidInput(f"unknown level {self.level!r} (use global, host or queue)")
        if self.source not in SOURCES:
            raise InvalidInput(f"unknown offer source {self.source!r} (use fixed, load or capacity)")


REASON_NOT_OFFERED = Reason("not-offered", "{resource}={requested} requested, not offered on any level")
REASON_OFFER_SHORT = Reason("offer-short", "{resource}={requested} requested, {offered} offered ({level} {source})")


@dataclass(frozen=True, slots=True)
class Shortfall:
    """Why a request is not met: the first level (and value) that refused it."""

    name: str
    requested: Any
    offered: Any
    level: str | None
    source: str | None
    type: ValueType = ValueType.STRING

    def why(self) -> tuple[Reason, dict[str, Any]]:
        """The reason constant and its details, values shown as the type reads them."""
        probe = Complex(self.name, self.name, self.type, Relop.EQ, Requestable.YES, Consumable.NO, "NONE", 0)
        detail = {"resource": self.name, "requested": format_value(probe, self.requested)}
        if self.level is None:
            return REASON_NOT_OFFERED, detail
        words = _SOURCE_WORDS.get(self.source or "", self.source or "")
        return REASON_OFFER_SHORT, {**detail, "offered": format_value(probe, self.offered), "level": self.level,
                                    "source": words}

    def reason(self) -> str:
        """E.g. ``mem_free=4G requested, 2G offered (host load value)``."""
        why, detail = self.why()
        return why.format(**detail)


def _more_restrictive(cx: Complex, first: Any, second: Any) -> bool:
    """True when ``first`` admits no more requests than ``second``."""
    if cx.relop in LOWER_BOUND_RELOPS:
        return numeric_value(cx, first) >= numeric_value(cx, second)
    return numeric_value(cx, first) <= numeric_value(cx, second)


def effective_offer(cx: Complex, fixed: Any | None, load: Any | None, *, level: str = "host") -> Offer | None:
    """One level's value when it has both a configured (fixed) value and a
    load value (complex(5) "Overriding attributes"; SPEC 000 section 3).

    For ``==``/``!=`` (and strings) the configured value always wins. For
    ``<=``/``<`` the smaller and for ``>=``/``>`` the larger value wins, so
    a configured value overrides a load value only when it is more
    restrictive (mem_free configured 1G, load 4G -> 1G fixed; configured
    1G, load 0.9G -> 0.9G load); on a tie the configured value is named.
    """
    if fixed is None and load is None:
        return None
    if load is None:
        return Offer(level, fixed, "fixed")
    if fixed is None:
        return Offer(level, load, "load")
    if cx.type in STRING_TYPES or cx.relop in (Relop.EQ, Relop.NE):
        return Offer(level, fixed, "fixed")
    if _more_restrictive(cx, fixed, load):
        return Offer(level, fixed, "fixed")
    return Offer(level, load, "load")


def _ordered(offers: Iterable[Offer]) -> list[Offer]:
    ordered = sorted((offer for offer in offers if offer.value is not None), key=lambda o: LEVEL_ORDER.index(o.level))
    for before, after in zip(ordered, ordered[1:]):
        if before.level == after.level:
            raise InvalidInput(f"two offers on the {before.level} level; combine them with effective_offer first")
    return ordered


def check_hierarchy(cx: Complex, requested: Any, offers: Iterable[Offer]) -> Shortfall | None:
    """Match one request against the levels, strictly global -> host ->
    queue (SPEC 000 sections 3 and 5; complex(5) "Overriding attributes").

    A level that does not define the attribute is skipped; the first level
    whose value does not satisfy the request ends the evaluation and is
    named in the Shortfall; None when every defining level is satisfied.
    For ordered relops each level is tested with the value in force there
    (its own, narrowed by the levels above); since narrowing keeps the more
    restrictive value, the level that fails is the first whose own value
    fails. For ``==``/``!=`` every defining level must match on its own.
    No defining level at all means the request cannot be met. For a
    consumable, pass the job's amount and offers of source ``capacity``.
    """
    current: Offer | None = None
    ordered = _ordered(offers)
    for offer in ordered:
        if current is None or cx.type in STRING_TYPES or cx.relop in (Relop.EQ, Relop.NE):
            current = offer
        elif not _more_restrictive(cx, current.value, offer.value):
            current = offer
        if not satisfies(cx, requested, current.value):
            return Shortfall(cx.name, requested, current.value, current.level, current.source, cx.type)
    if not ordered:
        return Shortfall(cx.name, requested, None, None, None, cx.type)
    return None


def offers(cx: Complex, levels: tuple[LevelValues, ...], upto: str) -> list[Offer]:
    """What each level down to ``upto`` offers for ``cx``, its configured and load values overridden."""
    out = []
    for level in levels:
        offer = effective_offer(cx, level.fixed.get(cx.name), level.load.get(cx.name), level=level.level)
        if offer is not None:
            out.append(offer)
        if level.level == upto:
            break
    return out


def request_shortfall(cx: Complex, requested: Any, levels: tuple[LevelValues, ...], upto: str) -> Shortfall | None:
    """The one judgement of a hard, non-consumable request against the
    levels down to ``upto`` (global -> host -> queue), for a job at match
    time and for an advance reservation at its grant alike.

    A queue limit that no level sets offers no limit (queue_conf(5)); any
    other request no level offers is a Shortfall of level None ("not
    offered on any level"), which each caller weighs by what it knows of
    the host.
    """
    found = offers(cx, levels, upto)
    if not found and cx.name in UNLIMITED_BY_DEFAULT:
        return None
    return check_hierarchy(cx, requested, found)


def host_may_offer(cx: Complex) -> bool:
    """Whether a pilot's host may offer ``cx`` where no configured level does."""
    return cx.name in PILOT_REPORTED


def charged(table: ComplexTable, requests: Mapping[str, Any]) -> tuple[tuple[Complex, Any], ...]:
    """What a job is checked for: its requests, plus every consumable whose default it is charged."""
    out = {name: (table.resolve(name), value) for name, value in requests.items()}
    for cx in table:
        if cx.is_consumable and cx.name not in out and default_value(cx) > 0:
            out[cx.name] = (cx, None)
    return tuple(out.values())
