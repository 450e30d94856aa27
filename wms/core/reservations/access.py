"""Who may create, use and delete advance reservations.

* Creating one (specs/003 5.2.2.1.2): managers, operators and members of
  the ``arusers`` user set (qrsub(1)).
* The access list (-u): users and ``@userset`` names; by default only the
  owner. A job may use the reservation only if its owner is on the list.
* Queues (specs/003 5.2.2.1.3 item 1, queue_conf(5) user_lists and
  xuser_lists): a queue is reserved only if EVERY user of the access list
  may run there: a user in one of the queue's ``xuser_lists`` sets is
  denied; when ``user_lists`` names sets, the user must be in one of them.
  A user set on the access list stands for all its members.
* Deleting or changing one (qrdel(1)): its owner, operators and managers.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from wms.core.errors import InvalidInput
from wms.core.groups import members

ARUSERS = "arusers"
ADMIN_ROLES = frozenset({"manager", "operator"})
WILDCARD = "*"


def set_members(usersets: Mapping[str, Sequence[str]], name: str) -> frozenset[str]:
    """The users of user set ``name``; members written ``@other`` are nested sets."""
    return members({f"@{key}": value for key, value in usersets.items()}, f"@{name.lstrip('@')}")


def may_create(role: str, user: str, usersets: Mapping[str, Sequence[str]]) -> bool:
    return role in ADMIN_ROLES or user in set_members(usersets, ARUSERS)


def may_administer(role: str, user: str, owner: str) -> bool:
    return role in ADMIN_ROLES or user == owner


def parse_acl(entries: Iterable[str], usersets: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """The -u list, checked: plain user names, ``@set`` of cluster.yaml, or ``*``; order kept, no repeats."""
    out: list[str] = []
    for raw in entries:
        for item in str(raw).split(","):
            name = item.strip()
            if not name:
                raise InvalidInput(f"-u: empty user name in {raw!r}")
            if name.startswith("@") and name[1:] not in usersets:
                raise InvalidInput(f"-u: unknown user set {name[1:]!r} (define it in cluster.yaml usersets)")
            if name not in out:
                out.append(name)
    return tuple(out)


def acl_users(acl: Iterable[str], usersets: Mapping[str, Sequence[str]]) -> frozenset[str]:
    """The plain users an access list stands for (``*`` is kept as itself)."""
    out: set[str] = set()
    for entry in acl:
        if entry.startswith("@"):
            out |= set_members(usersets, entry[1:])
        else:
            out.add(entry)
    return frozenset(out)


def on_acl(user: str, acl: Iterable[str], usersets: Mapping[str, Sequence[str]]) -> bool:
    users = acl_users(acl, usersets)
    return WILDCARD in users or user in users


def _set_names(value: Any) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    return [str(v) for v in items if str(v).upper() != "NONE"]


def queue_denies(params: Mapping[str, Any], users: frozenset[str], acl: Iterable[str],
                 usersets: Mapping[str, Sequence[str]]) -> str | None:
    """Why one of ``users`` may not run in a queue with these parameters, or None."""
    allowed_sets = _set_names(params.get("user_lists"))
    denied_sets = _set_names(params.get("xuser_lists"))
    for entry in acl:
        if entry.startswith("@") and entry[1:] in denied_sets:
            return f"user set {entry[1:]} is in the queue's xuser_lists"
    for user in sorted(users):
        if user == WILDCARD:
            if allowed_sets or denied_sets:
                return "the access list admits every user ('*') but the queue restricts its users"
            continue
        for name in denied_sets:
            if user in set_members(usersets, name):
                return f"user {user} is denied by xuser_lists {name}"
        if allowed_sets and not any(user in set_members(usersets, name) for name in allowed_sets):
            return f"user {user} is in none of the queue's user_lists ({', '.join(allowed_sets)})"
    return None
