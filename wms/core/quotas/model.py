"""Rule sets as values (specs/001 "Resource Quota Rules"; sge_resource_quota(5) FORMAT)."""

from __future__ import annotations

from dataclasses import dataclass, replace

FILTER_KINDS = ("users", "projects", "pes", "queues", "hosts")
ALL = "*"


@dataclass(frozen=True)
class Filter:
    """One filter of a rule: the names it covers (``scope``), the names it
    excludes (``xscope``, written ``!name``) and whether it is expanded
    (written in braces: the limit counts per member, not for all together)."""

    scope: tuple[str, ...] = ()
    xscope: tuple[str, ...] = ()
    expand: bool = False


@dataclass(frozen=True)
class Term:
    """One term of a dynamic limit: ``weight`` or ``$complex*weight``, added or subtracted."""

    weight: float
    complex: str | None = None
    sign: int = 1


@dataclass(frozen=True)
class Limit:
    """``resource=value``: ``value`` as written; ``terms`` when it is a dynamic limit (``$num_proc*5``)."""

    resource: str
    value: str
    terms: tuple[Term, ...] | None = None

    @property
    def dynamic(self) -> bool:
        return self.terms is not None


@dataclass(frozen=True)
class Rule:
    """``limit [name N] [users ..] [projects ..] [pes ..] [queues ..] [hosts ..] to r=v,..``."""

    limits: tuple[Limit, ...]
    name: str | None = None
    users: Filter | None = None
    projects: Filter | None = None
    pes: Filter | None = None
    queues: Filter | None = None
    hosts: Filter | None = None

    def filter(self, kind: str) -> Filter | None:
        return getattr(self, kind)

    def limit(self, resource: str) -> Limit | None:
        return next((lim for lim in self.limits if lim.resource == resource), None)


@dataclass(frozen=True)
class RuleSet:
    name: str
    rules: tuple[Rule, ...] = ()
    enabled: bool = False
    description: str = ""

    def label(self, index: int) -> str:
        """``set/rule``: the rule's name, else its number (from 1) in the set."""
        rule = self.rules[index]
        return f"{self.name}/{rule.name or index + 1}"

    def find_rule(self, ref: str) -> int | None:
        """The index of the rule named ``ref``, or numbered ``ref`` (from 1)."""
        for index, rule in enumerate(self.rules):
            if rule.name == ref:
                return index
        if ref.isdigit() and 1 <= int(ref) <= len(self.rules):
            return int(ref) - 1
        return None

    def with_rule(self, index: int, rule: Rule) -> "RuleSet":
        rules = list(self.rules)
        rules[index] = rule
        return replace(self, rules=tuple(rules))
