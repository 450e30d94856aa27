"""Resource usage over time: a step function per resource (specs/003 5.2.2.1.3).

A resource is a key ``(scope, name)`` as in the usage rows: scope
``global``, ``host:<name>`` or ``queue:<Site/CE/Queue>``. Each use is an
interval ``[start, end)`` with an amount: a running job from now until its
h_rt runs out (plus the duration offset), or for ever when it has no
runtime limit; a reservation for its window. A reservation is granted only
if, at every instant of its window, what is already booked plus what it
asks for stays within the capacity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Iterable

Key = tuple[str, str]


@dataclass(frozen=True)
class Use:
    start: datetime
    end: datetime | None     # None: no end (a job without a runtime limit)
    amount: float


@dataclass
class Calendar:
    uses: dict[Key, list[Use]] = field(default_factory=dict)

    def add(self, key: Key, use: Use) -> None:
        self.uses.setdefault(key, []).append(use)

    def copy(self) -> "Calendar":
        return Calendar({key: list(items) for key, items in self.uses.items()})

    def peak(self, key: Key, start: datetime, end: datetime) -> float:
        """The highest total in use at any instant of ``[start, end)``."""
        inside = [u for u in self.uses.get(key, ()) if u.start < end and (u.end is None or u.end > start)]
        if not inside:
            return 0.0
        # The total only rises at a use's start, so the peak is at the
        # window's start or at one of the starts inside it.
        points = {start} | {u.start for u in inside if u.start > start}
        return max(sum(u.amount for u in inside if u.start <= p and (u.end is None or u.end > p))
                   for p in points)

    def free(self, key: Key, capacity: float, start: datetime, end: datetime) -> float:
        return capacity - self.peak(key, start, end)


def build(uses: Iterable[tuple[Key, Use]]) -> Calendar:
    calendar = Calendar()
    for key, use in uses:
        calendar.add(key, use)
    return calendar


def job_end(begun: datetime, h_rt: float | None, duration_offset: float) -> datetime | None:
    """Until when a running job holds what it took: its h_rt after it began,
    plus the duration offset that covers the time a job takes to end
    (specs/003 5.2.2.1.3); for ever when it has no runtime limit."""
    if h_rt is None:
        return None
    return begun + timedelta(seconds=h_rt + duration_offset)
