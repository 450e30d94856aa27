"""Host groups and user sets: named lists whose members may be other
groups (Grid Engine's ``@name``, hostgroup(5)); resolved to plain names."""

from __future__ import annotations

from typing import Mapping, Sequence


def members(groups: Mapping[str, Sequence[str]], name: str) -> frozenset[str]:
    """Every plain member of group ``name``, nested groups expanded (cycles are ignored)."""
    seen: set[str] = set()
    out: set[str] = set()
    stack = [name]
    while stack:
        group = stack.pop()
        if group in seen:
            continue
        seen.add(group)
        for member in groups.get(group, ()):
            if member.startswith("@"):
                stack.append(member)
            else:
                out.add(member)
    return frozenset(out)


def groups_of(groups: Mapping[str, Sequence[str]], name: str) -> list[str]:
    """The groups holding ``name`` directly or through nesting, sorted."""
    return sorted(group for group in groups if name in members(groups, group))
