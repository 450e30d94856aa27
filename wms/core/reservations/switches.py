"""qrsub's switches, checked (specs/003 5.1.3.1, qrsub(1)): the window, -l,
-u, -pe/-alloc slot ranges, -q, -m/-M, -N/-A. Each refusal names the switch
and the problem; the request is refused whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable

from wms.core import complexes as cx_rules
from wms.core.complexes import ComplexTable
from wms.core.errors import InvalidInput
from wms.core.reservations import access
from wms.core.reservations.grant import Request
from wms.core.reservations.timespec import make_window, parse_time_span

DEFAULT_ACCOUNT = "sge"
MAIL_FLAGS = frozenset("bean")
ALLOCATION_RULES = ("$fill_up", "$round_robin", "$pe_slots")
_NAME = re.compile(r"^[^\s/:@\\*?,'\"]+$")


@dataclass
class ReservationSpec:
    """qrsub's switches as the API receives them (times already read by the client)."""

    start: datetime | None = None
    end: datetime | None = None
    duration: str | None = None
    name: str = ""
    account: str = DEFAULT_ACCOUNT
    resources: dict[str, Any] = field(default_factory=dict)
    users: list[str] = field(default_factory=list)
    queues: list[str] = field(default_factory=list)
    interactive: bool = False
    pe: str | None = None
    pe_slots: str | None = None
    allocation: str | None = None
    # -masterq: where the master task of the parallel jobs may run (qrsub(1)).
    master_queues: list[str] = field(default_factory=list)
    ckpt: str | None = None
    mail_options: str = "n"
    mail_list: list[str] = field(default_factory=list)
    hard_error: bool = False
    verify: bool = False


def parse_slot_range(text: str, pe_slots: int | None = None) -> tuple[int, int]:
    """``n``, ``n-m``, ``-m``, ``n-`` (sge_types(1) range); an open end is the PE's slots."""
    match = re.fullmatch(r"\s*(\d*)\s*(-?)\s*(\d*)\s*", str(text))
    if not match or not (match.group(1) or match.group(3)):
        raise InvalidInput(f"-pe: {text!r} is not a slot range (n, n-m, -m or n-)")
    low = int(match.group(1) or 1)
    if match.group(2):
        high = int(match.group(3)) if match.group(3) else (pe_slots or low)
    else:
        high = low
    if low < 1 or high < low:
        raise InvalidInput(f"-pe: slot range {text!r} is empty")
    return low, high


def check_name(name: str, what: str = "-N") -> str:
    if name and (not _NAME.match(name) or name[0].isdigit()):
        raise InvalidInput(f"{what}: {name!r} is not a valid name (no blanks or /:@\\*?,'\", not starting "
                           "with a digit)")
    return name


def parse_mail_options(text: str) -> str:
    flags = str(text or "n").strip()
    if not flags or any(c not in MAIL_FLAGS for c in flags) or ("n" in flags and len(flags) > 1):
        raise InvalidInput(f"-m: {text!r} must be a combination of b, e and a, or n")
    return "".join(sorted(set(flags), key="bean".index))


def parse_mail_list(items: Iterable[str]) -> list[str]:
    out = []
    for item in items:
        for address in str(item).split(","):
            address = address.strip()
            if not address or any(c.isspace() for c in address) or address.count("@") > 1:
                raise InvalidInput(f"-M: {address!r} is not user[@host]")
            out.append(address)
    return out


def build_request(table: ComplexTable, cluster: Any, owner: str, spec: ReservationSpec,
                  now: datetime) -> tuple[Request, dict[str, Any]]:
    """The grant's request and what is stored of it; refused whole with the first problem.

    ``cluster`` is cluster.yaml (usersets, pes); ``owner`` the submitter,
    the access list when -u is not given.
    """
    duration = parse_time_span(spec.duration) if spec.duration not in (None, "") else None
    window = make_window(now, spec.start, spec.end, duration)
    hard = cx_rules.validate_requests(table, spec.resources, where="-l")
    acl = access.parse_acl(spec.users or [owner], cluster.usersets)
    slots = (1, 1)
    if spec.pe is not None:
        if spec.pe not in cluster.pes:
            raise InvalidInput(f"-pe: unknown parallel environment {spec.pe!r}")
        slots = parse_slot_range(spec.pe_slots or "1", cluster.pes[spec.pe].slots)
        if slots[0] > cluster.pes[spec.pe].slots:
            raise InvalidInput(f"-pe: {slots[0]} slots requested, parallel environment {spec.pe} has "
                               f"{cluster.pes[spec.pe].slots}")
        slots = (slots[0], min(slots[1], cluster.pes[spec.pe].slots))
    if spec.pe is not None and spec.allocation is not None:
        raise InvalidInput("-pe and -alloc exclude each other")
    allocation = None
    if spec.allocation is not None:
        allocation = spec.allocation.strip()
        if allocation not in ALLOCATION_RULES and not (allocation.isdigit() and int(allocation) > 0):
            raise InvalidInput(f"-alloc: {spec.allocation!r} is not an allocation rule ($fill_up, $round_robin, "
                               "$pe_slots or a number of slots per host)")
        slots = parse_slot_range(spec.pe_slots or "1")
    for pattern in spec.queues:
        if not pattern.strip():
            raise InvalidInput("-q: empty queue name")
    if spec.master_queues and spec.pe is None:
        raise InvalidInput("-masterq: only meaningful for a parallel reservation, together with -pe")
    for pattern in spec.master_queues:
        if not pattern.strip():
            raise InvalidInput("-masterq: empty queue name")
    request = Request(window=window, acl=acl, hard=hard, queue_patterns=tuple(p.strip() for p in spec.queues),
                      slots_min=slots[0], slots_max=slots[1], pe=spec.pe, ckpt=spec.ckpt or None,
                      interactive=spec.interactive, allocation=allocation,
                      master_queues=tuple(p.strip() for p in spec.master_queues))
    stored = {
        "resources": {name: cx_rules.format_value(table.resolve(name), value)
                      for name, value in hard.items()},
        "queues": list(request.queue_patterns), "pe": spec.pe, "pe_range": list(slots), "ckpt": spec.ckpt,
        "allocation": allocation, "masterq": list(request.master_queues),
        "interactive": spec.interactive,
    }
    check_name(spec.name)
    check_name(spec.account or DEFAULT_ACCOUNT, "-A")
    return request, stored
