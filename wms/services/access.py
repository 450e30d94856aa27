"""Who may see or change which job, and who speaks for which pilot: the
one place for these rules.

Users see and kill only their own jobs; operators and managers all jobs
(Grid Engine's operators may delete other users' jobs too). A pilot's
token speaks for one pilot (docs/security.md, "Pilots and tokens"): it
reports, heartbeats and uploads output only for the jobs given to that
pilot, reads only those jobs, and asks only for jobs of its token's VO.
"""

from __future__ import annotations

from wms.core.identity import Identity

USER, PILOT, OPERATOR, MANAGER = "user", "pilot", "operator", "manager"
ROLES = (USER, PILOT, OPERATOR, MANAGER)
ADMINS = frozenset({OPERATOR, MANAGER})


def sees_all_jobs(identity: Identity) -> bool:
    return identity.role in ADMINS


def may_change_job(identity: Identity, owner: str) -> bool:
    return identity.role in ADMINS or (identity.role == USER and identity.user == owner)


def may_see_job(identity: Identity, owner: str, pilot_id: str | None = None) -> bool:
    """``owner``'s job, now held by ``pilot_id`` (None: no pilot)."""
    if identity.role in ADMINS:
        return True
    if identity.role == PILOT:
        return identity.pilot_id is not None and pilot_id == identity.pilot_id
    return identity.user == owner


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
