"""Does a rule's filter match a job, and which instance does the job count in?
(specs/001 "Resource Quota Rules": lists, ``!``, ``{}``, @groups;
sge_resource_quota(5) "users", "projects", "pes", "queues", "hosts").

* A filter matches a name listed in it, a member of a listed @group
  (nested groups resolved), or a name a wildcard item matches (``*``,
  ``LCG.CERN.ch/*``), unless the name is excluded with ``!``: an excluded
  name is never matched, even when it is also listed (``@staff,!roland,roland``).
  A filter of exclusions only matches every other name.
* users, queues and hosts: no filter matches every job. projects and pes:
  no filter matches every job; ``*`` only jobs that name a project (pe);
  ``!*`` only jobs that name none.
* Queues are named ``Site/CE/Queue``; an item without ``/`` is also
  matched against the queue's own name. Hosts are the pilots' worker nodes.
* Expanded filters (braces) count per member: the job's own user, host,
  ... is its instance; a group inside braces thereby expands to its members.

Groups are resolved once when the rules are compiled, not per job: most
of the cost of quotas in Grid Engine was membership resolution.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from wms.core.groups import members
from wms.core.patterns import Pattern, compile_pattern, is_pattern
from wms.core.quotas.model import ALL, Filter

OPTIONAL_KINDS = frozenset({"projects", "pes"})
SINGULAR = {"users": "user", "projects": "project", "pes": "pe", "queues": "queue", "hosts": "host"}


@dataclass(frozen=True)
class Groups:
    """User sets (``staff: [..]``, named ``@staff`` in filters) and host groups (``"@lx_hosts": [..]``)."""

    usersets: Mapping[str, Sequence[str]]
    hostgroups: Mapping[str, Sequence[str]]

    def resolve(self, kind: str, group: str) -> frozenset[str]:
        if kind == "users":
            table = {f"@{name}": [m if not m.startswith("@") else m for m in values]
                     for name, values in self.usersets.items()}
            return members(table, group)
        return members(self.hostgroups, group)


class _Names:
    """Literal names (groups already expanded) and wildcard patterns."""

    __slots__ = ("names", "patterns", "any")

    def __init__(self, kind: str, items: Sequence[str], groups: Groups) -> None:
        names: set[str] = set()
        patterns: list[Pattern] = []
        for item in items:
            if item.startswith("@"):
                names |= groups.resolve(kind, item)
            elif is_pattern(item):
                patterns.append(compile_pattern(item))
            else:
                names.add(item)
        self.names = frozenset(names)
        self.patterns = tuple(patterns)
        self.any = ALL in items

    def __contains__(self, value: str) -> bool:
        if self.any or value in self.names:
            return True
        return any(p.matches(value) for p in self.patterns)


class CompiledFilter:
    """A filter with its groups resolved, ready to match many jobs."""

    __slots__ = ("kind", "expand", "scope", "xscope", "only_exclusions", "text")

    def __init__(self, kind: str, flt: Filter, groups: Groups) -> None:
        self.kind = kind
        self.expand = flt.expand
        self.scope = _Names(kind, flt.scope, groups)
        self.xscope = _Names(kind, flt.xscope, groups)
        self.only_exclusions = not flt.scope

    def _contains(self, names: _Names, value: str) -> bool:
        if value in names:
            return True
        if self.kind == "queues" and "/" in value:
            return value.rsplit("/", 1)[1] in names and not names.any
        return False

    def matches(self, value: str | None) -> bool:
        if value is None:
            # A job that names no project (pe): only ``!*`` takes it in.
            return self.kind in OPTIONAL_KINDS and self.xscope.any
        if self._contains(self.xscope, value):
            return False
        return self.only_exclusions or self._contains(self.scope, value)
