"""Whether a job may ask for an advance reservation (specs/003 5.3.2.1).

A job submitted with ``-ar ID`` is refused at submission unless the
reservation exists and is not over, the user is on its access list, the
job's h_rt fits in what is left of it, and the job asks for no more of any
consumable than the reservation holds. Every job of a reservation may run
as long as the reservation's duration minus the duration offset (specs/003
5.2.2.1.1): that runtime limit is the answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from wms.core import complexes as cx_rules
from wms.core.complexes import ComplexTable
from wms.core.errors import InvalidInput
from wms.core.quantities import format_time, time_limit


def runtime_limit(ar_id: int, start: datetime, end: datetime, hard: Mapping[str, Any], slots: int,
                  held: Iterable[tuple[str, float]], now: datetime, duration_offset: float,
                  table: ComplexTable) -> float:
    """The runtime limit of a job of reservation ``ar_id``, or InvalidInput
    saying what of the job does not fit; ``held`` the (resource, amount) the
    reservation booked."""
    window = (end - start).total_seconds() - duration_offset
    left = (end - now).total_seconds() - duration_offset
    h_rt = time_limit(hard.get("h_rt"))
    if h_rt is not None:
        if h_rt > window:
            raise InvalidInput(f"-ar: h_rt {format_time(h_rt)} is longer than the reservation's "
                               f"duration minus duration_offset ({format_time(max(window, 0))})")
        if h_rt > left:
            raise InvalidInput(f"-ar: h_rt {format_time(h_rt)} does not end before advance "
                               f"reservation {ar_id} ends ({format_time(max(left, 0))} left)")
    reserved: dict[str, float] = {}
    for resource, amount in held:
        reserved[resource] = reserved.get(resource, 0.0) + amount
    for name, value in hard.items():
        cx = table.resolve(name)
        if cx.is_consumable:
            amount = cx_rules.consumable_amount(cx, value, slots)
            if amount > reserved.get(cx.name, 0.0):
                raise InvalidInput(f"-ar: {cx.name}={cx_rules.format_value(cx, value)} is more than advance "
                                   f"reservation {ar_id} holds ({cx_rules.format_value(cx, reserved.get(cx.name, 0))})")
    if slots > reserved.get("slots", 0):
        raise InvalidInput(f"-ar: {slots} slots requested, advance reservation {ar_id} holds "
                           f"{int(reserved.get('slots', 0))}")
    if window <= 0:
        raise InvalidInput(f"-ar: advance reservation {ar_id} is shorter than duration_offset: no job fits")
    return window
