"""Who may see or change which object, and who speaks for which pilot: the
one place for these rules (docs/security.md, "Permissions").

* Users see other users' jobs, task queues, reservations and quota usage
  as the visibility policy (wms.yaml ``visibility:``, wms/core/visibility.py)
  allows; they change (kill, qrdel, qralter) only their own objects.
* Operators and managers see and change everything (Grid Engine's
  operators may delete other users' jobs too).
* A pilot's token speaks for one pilot (docs/security.md, "Pilots and
  tokens"): it reports, heartbeats and uploads output only for the jobs
  given to that pilot, reads of those jobs only what it needs to run them
  (their status and JDL), and asks only for jobs of its token's VO.
* An object the caller may not see answers as a missing one would (the
  same status and the same message), so that ids cannot be probed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from wms.core.identity import Identity
from wms.core.reservations.access import on_acl
from wms.core.visibility import ALL, GROUP, VO, Holder, Visibility, in_scope

if TYPE_CHECKING:
    from wms.services.runtime import Runtime

USER, PILOT, OPERATOR, MANAGER = "user", "pilot", "operator", "manager"
ROLES = (USER, PILOT, OPERATOR, MANAGER)
ADMINS = frozenset({OPERATOR, MANAGER})

# What of a job one asks for; a pilot reads only what it needs to run the jobs it holds.
STATUS, JDL, HISTORY, OUTPUT, WHY, MATCH_QUEUES = "status", "JDL", "history", "output", "why", "match-queues"
PILOT_READS = frozenset({STATUS, JDL})


def policy(runtime: Runtime) -> Visibility:
    """The configured visibility policy (wms.yaml ``visibility:``)."""
    return runtime.config.settings.visibility.core()


def viewer(identity: Identity) -> Holder:
    return Holder(identity.user, identity.group, identity.vo)


def may_change_job(identity: Identity, owner: str) -> bool:
    return identity.role in ADMINS or (identity.role == USER and identity.user == owner)


def may_see_job(identity: Identity, job: dict[str, Any], policy: Visibility) -> bool:
    """``job`` a row with owner, owner_group, vo and pilot_id (the pilot holding it, None: none)."""
    if identity.role in ADMINS:
        return True
    if identity.role == PILOT:
        return identity.pilot_id is not None and job["pilot_id"] == identity.pilot_id
    return in_scope(policy.jobs, viewer(identity), Holder(job["owner"], job["owner_group"], job["vo"]))


def job_columns_seen(identity: Identity, policy: Visibility) -> dict[str, str] | None:
    """The jobs a user may list, as columns any one of which must hold its value (None: all jobs):
    :func:`may_see_job`'s rule (``in_scope``) written as a query, so that the database filters.

    Only for users and administrators: a pilot lists the jobs it holds."""
    if identity.role in ADMINS or policy.jobs == ALL:
        return None
    columns = {"owner": identity.user}
    if policy.jobs == GROUP:
        columns["owner_group"] = identity.group
    elif policy.jobs == VO:
        columns["vo"] = identity.vo
    return columns


def may_see_task_queue(identity: Identity, tq: dict[str, Any], policy: Visibility) -> bool:
    if identity.role in ADMINS:
        return True
    return in_scope(policy.task_queues, viewer(identity), Holder(tq["owner"], tq["owner_group"], tq["vo"]))


def may_see_pool(identity: Identity, vo: str, policy: Visibility) -> bool:
    """A submit pool is a VO's requirements and job count, with no owner: its VO's users and
    pilots see it, everybody when task queues are visible to all."""
    return identity.role in ADMINS or policy.task_queues == ALL or identity.vo == vo


def may_see_reservation(identity: Identity, reservation: dict[str, Any], policy: Visibility,
                        usersets: Mapping[str, Sequence[str]]) -> bool:
    """A reservation records its owner's name only: its scope is the owner or all (OWNER_OR_ALL).
    Under ``owner`` the users on its access list see it too: they are meant to submit into it."""
    if identity.role in ADMINS or policy.reservations == ALL or identity.user == reservation["owner"]:
        return True
    return identity.role == USER and on_acl(identity.user, json.loads(reservation["acl"]), usersets)


def may_see_usage_of(identity: Identity, users: list[str], policy: Visibility) -> bool:
    """Whether the caller may ask for the quota usage of ``users`` (names or patterns)."""
    return identity.role in ADMINS or policy.quota_usage == ALL or all(u == identity.user for u in users)


def may_act_for_pilot(identity: Identity, pilot_id: str) -> bool:
    """Whether the caller may request, report, heartbeat or upload as the pilot ``pilot_id``."""
    if identity.role in ADMINS:
        return True
    return identity.role == PILOT and identity.pilot_id is not None and identity.pilot_id == pilot_id


def matching_vo(identity: Identity) -> str | None:
    """The only VO whose jobs the caller's job requests may get (None: any)."""
    return identity.vo if identity.role == PILOT else None
