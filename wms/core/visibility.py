"""What a user sees of other users' objects: the visibility policy
(wms.yaml ``visibility:``, docs/configuration.md and docs/security.md).

Each kind of object has a scope, the widest circle of users that sees
another user's object of that kind:

* ``owner``: its owner only;
* ``group``: users of the owner's group (the job's OwnerGroup);
* ``vo``: users of the owner's VO;
* ``all``: every user.

Operators and managers see everything whatever the scope, and the owner
always sees their own objects; pilots are not users and are not governed
by these scopes (wms/services/access.py).

The defaults follow what the users of the two systems expect:

* jobs (status, JDL, history, output, why): ``owner``, as DIRAC's job
  monitoring shows users their own jobs;
* task queues: ``vo``: a VO's task queues show its users' owners, groups
  and requirements, nothing another VO has to see;
* advance reservations: ``all``: qrstat(1) "without any options ... will
  display an overview of all reservations" (specs/003);
* quota usage: ``all``: qquota(1) ``-u`` answers for any user.
"""

from __future__ import annotations

from dataclasses import dataclass

OWNER, GROUP, VO, ALL = "owner", "group", "vo", "all"
SCOPES = (OWNER, GROUP, VO, ALL)
# Reservations and quota usage record only their owner's name: the owner's
# group and VO are not known to them, so their scope is all or nothing.
OWNER_OR_ALL = (OWNER, ALL)


@dataclass(frozen=True)
class Visibility:
    jobs: str = OWNER
    task_queues: str = VO
    reservations: str = ALL
    quota_usage: str = ALL


DEFAULT = Visibility()


@dataclass(frozen=True)
class Holder:
    """Whose an object is, or who looks at it: a user, their group and their VO."""

    user: str
    group: str
    vo: str


def in_scope(scope: str, viewer: Holder, owner: Holder) -> bool:
    """Whether ``viewer`` sees ``owner``'s object under ``scope`` (the owner always does)."""
    if viewer.user == owner.user or scope == ALL:
        return True
    if scope == GROUP:
        return viewer.group == owner.group
    if scope == VO:
        return viewer.vo == owner.vo
    return False
