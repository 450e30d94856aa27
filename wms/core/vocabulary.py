"""The names a resource's ad may define, and a job's expression checked against them.

A Requirements expression reads the resource with ``other.X`` (and an
unscoped ``X`` the job does not define itself, specs/004; see
core/pools.py). A name that no resource defines is Undefined on every
queue and every pilot, so the expression is never True: the job would
wait for ever, in silence, while the SiteDirector sends pilots for it
(the pool keeps every queue where the expression is Undefined). So the
names are checked at submission (services/feasibility.py): each one no
resource describes is named, with the closest known name.

The known names (:class:`Vocabulary`) are the ones a resource's ad can
hold: every parameter of a site, CE or queue in resources.yaml (as the
VO sees them), the parameters operations.yaml ``JobDescription.Parameters``
describes, the complexes (a pilot may report any of them as a load
value), what every pilot's description adds (its load values, Host,
Platform, CPUTimeLeft, ...), and the names a VO declares its pilots
publish (operations.yaml ``JobDescription.PilotAttributes``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from wms.core import classad

#: How alike a known name must be to be offered as the one meant (difflib's ratio).
CLOSE_ENOUGH = 0.75

SCOPED = "other.{name}: no resource describes {name}"
UNSCOPED = "{name}: neither the job nor any resource describes {name}"
SUGGESTION = "; did you mean {known}?"
DECLARE = (" (names a VO's pilots publish are declared in operations.yaml "
           "JobDescription.PilotAttributes)")


@dataclass(frozen=True)
class Vocabulary:
    """The names a resource's ad may define, by their case-folded form (ClassAd names ignore case)."""

    names: Mapping[str, str]

    @classmethod
    def of(cls, *groups: Iterable[str]) -> Vocabulary:
        names: dict[str, str] = {}
        for group in groups:
            for name in group:
                names.setdefault(name.lower(), name)
        return cls(names)

    def knows(self, name: str) -> bool:
        return name.lower() in self.names

    def closest(self, name: str) -> str | None:
        """The known name most like *name*, if one is close enough."""
        found = difflib.get_close_matches(name.lower(), list(self.names), n=1, cutoff=CLOSE_ENOUGH)
        return self.names[found[0]] if found else None


def target_names(expression: str, own: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """The names *expression* reads from the resource: ``(name, scoped)``,
    scoped for ``other.X``/``target.X``, not for an unscoped name the job's
    own ad (*own*, core/pools.py ``job_ad``'s record) does not define."""
    defined = {name.lower() for name in own}
    out = [(name, True) for name in classad.external_refs(expression)]
    out.extend((name, False) for name in classad.own_refs(expression, unscoped_only=True)
               if name.lower() not in defined)
    return out


def unknown_names(expression: str, own: Mapping[str, Any], vocabulary: Vocabulary) -> list[str]:
    """One message per name *expression* reads from the resource that no
    resource describes, e.g. ``other.Memroy: no resource describes Memroy;
    did you mean Memory?``."""
    out = []
    for name, scoped in target_names(expression, own):
        if vocabulary.knows(name):
            continue
        message = (SCOPED if scoped else UNSCOPED).format(name=name)
        known = vocabulary.closest(name)
        out.append(message + (SUGGESTION.format(known=known) if known else DECLARE))
    return out
