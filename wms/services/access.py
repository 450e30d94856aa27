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
* A job token (docs/security.md, "Job tokens") speaks for one attempt of
  one job, and only while that attempt is alive: it reads that job's
  status and JDL and sets its application status, nothing else.
* An object the caller may not see answers as a missing one would (the
  same status and the same message), so that ids cannot be probed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from wms.core.identity import Identity
from wms.core.reservations.access import on_acl
from wms.core.states import JobStatus
from wms.core.visibility import ALL, GROUP, VO, Holder, Visibility, in_scope

if TYPE_CHECKING:
    from wms.services.runtime import Runtime

USER, PILOT, OPERATOR, MANAGER, JOB = "user", "pilot", "operator", "manager", "job"
# The roles of stored tokens (`wms admin token create`, the SiteDirector's).
TOKEN_ROLES = (USER, PILOT, OPERATOR, MANAGER)
# JOB is a job token's: minted by the Matcher with each hand-out, never stored.
ROLES = (*TOKEN_ROLES, JOB)
ADMINS = frozenset({OPERATOR, MANAGER})

# What of a job one asks for; a pilot reads only what it needs to run the jobs it holds,
# a job token the same of its own job.
STATUS, JDL, HISTORY, OUTPUT, WHY, MATCH_QUEUES = "status", "JDL", "history", "output", "why", "match-queues"
PILOT_READS = frozenset({STATUS, JDL})
JOB_READS = frozenset({STATUS, JDL})

# The states in which a job's attempt is alive: handed out and not over.
# A job token works only while its attempt is in one of them.
ATTEMPT_ALIVE = frozenset({JobStatus.MATCHED.value, JobStatus.RUNNING.value})


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
    if identity.role == JOB:
        return job_token_holds(identity, job)
    return in_scope(policy.jobs, viewer(identity), Holder(job["owner"], job["owner_group"], job["vo"]))


def job_token_holds(identity: Identity, job: dict[str, Any]) -> bool:
    """Whether the caller is a job token of ``job``'s current attempt, and that attempt alive.

    Checked on every use (the token names the attempt, the row says
    whether it goes on): a token outlives nothing of its attempt."""
    return (identity.role == JOB and identity.job_id == job["job_id"] and identity.attempt == job["attempt"]
            and job["status"] in ATTEMPT_ALIVE)


def may_set_application_status(identity: Identity, job: dict[str, Any]) -> bool:
    """Who may set a job's application status: its job token, the pilot holding it,
    operators and managers (never a user: it is the running payload's own line)."""
    if identity.role in ADMINS:
        return True
    if identity.role == PILOT:
        return identity.pilot_id is not None and job["pilot_id"] == identity.pilot_id
    return job_token_holds(identity, job)


def job_columns_seen(identity: Identity, policy: Visibility) -> dict[str, str] | None:
    """The jobs a user may list, as columns any one of which must hold its value (None: all jobs):
    :func:`may_see_job`'s rule (``in_scope``) written as a query, so that the database filters.

    Only for users and administrators: a pilot lists the jobs it holds."""
    return _columns_seen(identity, policy.jobs)


def task_queue_columns_seen(identity: Identity, policy: Visibility) -> dict[str, str] | None:
    """The task queues a user may list (visibility.task_queues; administrators all), as
    :func:`job_columns_seen` says of jobs."""
    return _columns_seen(identity, policy.task_queues)


def _columns_seen(identity: Identity, scope: str) -> dict[str, str] | None:
    """``in_scope(scope, viewer(identity), owner)`` as the owner columns (owner, owner_group, vo)
    any one of which must hold the viewer's value; None: every row (administrators, scope all)."""
    if identity.role in ADMINS or scope == ALL:
        return None
    columns = {"owner": identity.user}
    if scope == GROUP:
        columns["owner_group"] = identity.group
    elif scope == VO:
        columns["vo"] = identity.vo
    return columns


def may_see_pool(identity: Identity, vo: str, policy: Visibility) -> bool:
    """A submit pool is a VO's requirements and job count, with no owner: its VO's users and
    pilots see it, everybody when task queues are visible to all."""
    seen = pool_vo_seen(identity, policy)
    return seen is None or seen == vo


def pool_vo_seen(identity: Identity, policy: Visibility) -> str | None:
    """The VO whose pools the caller may list (:func:`may_see_pool` as a query); None: every VO's."""
    return None if identity.role in ADMINS or policy.task_queues == ALL else identity.vo


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


def may_read_sandbox(identity: Identity, owner: str) -> bool:
    """A job's sandboxes are its owner's (and the administrators'); its pilot's
    access goes through the job it holds (services/sandboxes.py)."""
    return identity.role in ADMINS or (identity.role == USER and identity.user == owner)


def may_act_for_pilot(identity: Identity, pilot_id: str) -> bool:
    """Whether the caller may request, report, heartbeat or upload as the pilot ``pilot_id``."""
    if identity.role in ADMINS:
        return True
    return identity.role == PILOT and identity.pilot_id is not None and identity.pilot_id == pilot_id


def matching_vo(identity: Identity) -> str | None:
    """The only VO whose jobs the caller's job requests may get (None: any)."""
    return identity.vo if identity.role == PILOT else None
