"""Who may see or change which job: the one place for these rules.

Users see and kill only their own jobs; operators and managers all jobs
(Grid Engine's operators may delete other users' jobs too); pilots read
job status (their own jobs' matching and status calls come with the
Matcher).
"""

from __future__ import annotations

from wms.core.identity import Identity

USER, PILOT, OPERATOR, MANAGER = "user", "pilot", "operator", "manager"
ROLES = (USER, PILOT, OPERATOR, MANAGER)
ADMINS = frozenset({OPERATOR, MANAGER})


def sees_all_jobs(identity: Identity) -> bool:
    return identity.role in ADMINS or identity.role == PILOT


def may_change_job(identity: Identity, owner: str) -> bool:
    return identity.role in ADMINS or (identity.role == USER and identity.user == owner)


def may_see_job(identity: Identity, owner: str) -> bool:
    return sees_all_jobs(identity) or identity.user == owner
