"""When a pilot asks again: after a busy server's Retry-After, and after empty answers.

Thousands of pilots that ask again at the same moment make the next burst
themselves; every delay here is stretched by a random part (jitter) so that
they spread out. A refusal's Retry-After is a floor: a pilot waits at least
that long, up to half as long again.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

#: The longest Retry-After believed (seconds): a wrong header must not park a pilot for hours.
MAX_RETRY_AFTER = 300.0
#: Empty answers in a row after which the wait stops growing (poll x 2**3).
MAX_DOUBLINGS = 3


def retry_after(header: str | None, now: datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delay-seconds or an HTTP date), or None when absent or unreadable."""
    if header is None or not header.strip():
        return None
    text = header.strip()
    if text.isdigit():
        return min(float(text), MAX_RETRY_AFTER)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    return min(max(0.0, seconds), MAX_RETRY_AFTER)


def busy_delay(asked: float, rand: Callable[[], float] = random.random) -> float:
    """The wait after a refusal that asked for ``asked`` seconds: at least that, up to half more."""
    return asked * (1.0 + rand() / 2)


def empty_delay(poll: float, empty: int, rand: Callable[[], float] = random.random) -> float:
    """The wait after the ``empty``-th empty answer in a row: ``poll`` doubled each
    time (up to 8 x poll), times a random factor between 0.5 and 1.5."""
    doublings = min(max(empty, 1) - 1, MAX_DOUBLINGS)
    return poll * 2**doublings * (0.5 + rand())
