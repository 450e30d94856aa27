"""Holds on jobs: who may set and release which kind, and what a held job says.

Grid Engine's qhold(1) and qrls(1) ``-h u|o|s``, in our roles:

* ``u``, the user hold: set and released by the job's owner, operators
  and managers;
* ``o``, the operator hold: operators and managers only, so the owner
  cannot release what an operator held;
* ``s``, the system hold: set by the system itself (a Requirements
  expression that fails at match time, wms.core.match.requirements) and
  by managers, released by managers only.

A job may carry several holds at once; it waits again only when the last
is released. qhold and qrls take ``u`` when no ``-h`` is given, as the man
pages say; ``wms release`` without ``-h`` releases every hold the caller
may release (docs/architecture.md, "Job states"). A job that has not
started can be held: a Waiting one, a Held one given another hold, and a
Matched one, which is taken back from its pilot before the pilot's Running
report is accepted (the report is then refused, and the pilot starts
nothing). A Running job is not held, as Grid Engine's hold affects pending
jobs only: it is stopped with a kill or a reschedule.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from wms.core.errors import InvalidInput
from wms.core.states import HoldType, JobStatus

#: The minor status of a held job begins so (wms.core.states.HELD_BY_SYSTEM for the system's).
HELD_BY = "Held by "
#: The order hold types are written in (``jobs.hold_types``, the minor status).
ORDER = (HoldType.USER, HoldType.OPERATOR, HoldType.SYSTEM)
#: The states a hold may be put on: those of a job that has not started.
HOLDABLE = frozenset({JobStatus.WAITING.value, JobStatus.HELD.value, JobStatus.MATCHED.value})
#: The longest minor status and reason the jobs table keeps.
MINOR_STATUS_MAX = 512
REASON_MAX = 256

# Which hold types each role may set and release (the same ones).
_MAY: dict[str, frozenset[HoldType]] = {
    "user": frozenset({HoldType.USER}),
    "operator": frozenset({HoldType.USER, HoldType.OPERATOR}),
    "manager": frozenset({HoldType.USER, HoldType.OPERATOR, HoldType.SYSTEM}),
}
_NAMES = {HoldType.USER: "user", HoldType.OPERATOR: "operator", HoldType.SYSTEM: "system"}


@dataclass(frozen=True)
class Hold:
    """One hold on a job: its type, who set it (a user name, or ``system``), why and when."""

    hold_type: HoldType
    holder: str
    reason: str
    time: datetime


def parse_types(text: str, where: str = "hold_types") -> frozenset[HoldType]:
    """The hold types of a ``-h`` value: letters of ``uos``, at least one."""
    letters = text.strip()
    bad = sorted({c for c in letters if c not in "uos"})
    if not letters or bad:
        shown = f" ({', '.join(map(repr, bad))} is not one)" if bad else ""
        raise InvalidInput(f"{where}: give hold types as letters of u (user), o (operator), s (system){shown}")
    return frozenset(HoldType(c) for c in letters)


def write_types(types: Iterable[HoldType]) -> str | None:
    """``jobs.hold_types`` for these types, in ORDER; None for none."""
    present = set(types)
    return "".join(t.value for t in ORDER if t in present) or None


def read_types(column: str | None) -> frozenset[HoldType]:
    return frozenset(HoldType(c) for c in (column or ""))


def may_use(role: str) -> frozenset[HoldType]:
    """The hold types a caller of ``role`` may set and release."""
    return _MAY.get(role, frozenset())


def refused_types(role: str, types: Iterable[HoldType]) -> str | None:
    """Why a caller of ``role`` may not set or release ``types`` (None: it may)."""
    refused = [t for t in ORDER if t in set(types) and t not in may_use(role)]
    if not refused:
        return None
    kinds = " or ".join(f"{_NAMES[t]} holds (-h {t.value})" for t in refused)
    who = {HoldType.OPERATOR: "operators and managers", HoldType.SYSTEM: "managers"}[refused[-1]]
    article = "an" if role == "operator" else "a"
    return f"{article} {role} may not set or release {kinds}: only {who} may"


def describe(hold: Hold) -> str:
    """One hold as the minor status and ``wms why`` say it."""
    who = {HoldType.USER: f"the user {hold.holder}", HoldType.OPERATOR: f"operator {hold.holder}",
           HoldType.SYSTEM: "the system"}[hold.hold_type]
    return f"{who}: {hold.reason}" if hold.reason else who


def minor_status(holds: Iterable[Hold]) -> str:
    """The minor status of a held job: every hold, who set it and why, in ORDER.

    A job the system alone holds reads ``Held by the system: <reason>``
    (HELD_BY_SYSTEM), as it did before other holds existed."""
    ordered = sorted(holds, key=lambda h: ORDER.index(h.hold_type))
    text = HELD_BY + "; by ".join(describe(h) for h in ordered)
    return clip(text)


def clip(text: str) -> str:
    """``text`` cut to what the minor status column keeps."""
    return text if len(text) <= MINOR_STATUS_MAX else text[: MINOR_STATUS_MAX - 3] + "..."


def kinds(types: Iterable[HoldType]) -> str:
    """``the user hold``, ``the user and operator holds``: what a release released."""
    names = [_NAMES[t] for t in ORDER if t in set(types)]
    return f"the {' and '.join(names)} hold{'s' if len(names) > 1 else ''}"


def clean_reason(text: str | None) -> str:
    """A hold's or release's reason: one line, at most REASON_MAX characters."""
    reason = " ".join((text or "").split())
    if len(reason) > REASON_MAX:
        raise InvalidInput(f"reason: at most {REASON_MAX} characters, not {len(reason)}")
    return reason


def how_to_release(holds: Iterable[Hold]) -> str:
    """Who may release these holds, as `wms why` says it."""
    types = {h.hold_type for h in holds}
    if HoldType.SYSTEM in types:
        who = "a manager"
    elif HoldType.OPERATOR in types:
        who = "an operator or a manager"
    else:
        who = "its owner, an operator or a manager"
    return f"{who} may release it: wms release ID, qrls -h {write_types(types) or 'u'} ID"
