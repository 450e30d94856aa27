"""Usage-row scopes: where an amount is accounted, built and read here only.

* ``global``: the whole system;
* ``host:<name>``: a configured host;
* ``queue:<Site/CE/Queue>``: one queue as a whole;
* ``ar:<id>|<scope>``: what advance reservation <id> booked at <scope>,
  used by its own jobs;
* ``rqs:<set>/<rule>:<instance>``: a resource quota rule instance (built
  and read by core/quotas/evaluate.py, whose rules name the instances);
* ``pilot:<pilot id>``: the slots a pilot's token holds, within what it
  declared (core/match/pilot_slots.py).
"""

from __future__ import annotations

from wms.core.resources import QueueRef

GLOBAL_SCOPE = "global"
_RESERVATION = "ar:"
PILOT_PREFIX = "pilot:"


def host_scope(host: str) -> str:
    return f"host:{host}"


def queue_scope(ref: QueueRef) -> str:
    return f"queue:{ref.name}"


def pilot_scope(pilot_id: str) -> str:
    return f"{PILOT_PREFIX}{pilot_id}"


def reservation_scope(ar_id: int, scope: str) -> str:
    """The reservation's own row at ``scope``."""
    return f"{_RESERVATION}{ar_id}|{scope}"


def inside_reservation(scope: str) -> tuple[int, str] | None:
    """``ar:<id>|<scope>`` -> (id, scope); None for any other scope."""
    if not scope.startswith(_RESERVATION):
        return None
    ar_id, _, inner = scope[len(_RESERVATION):].partition("|")
    return int(ar_id), inner
