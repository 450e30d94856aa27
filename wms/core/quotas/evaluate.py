"""The rule sets a Matcher applies (specs/001 "Rule Sets", "Dynamical
Limits"; sge_resource_quota(5)).

* Inside a set the rules are tried in order and the first whose filters
  all match the job is the set's one effective rule; the other rules of
  the set do not apply to that job, even if they are stricter.
* Every enabled set applies at once, so the most restrictive wins.
* A limit on a consumable (slots included) counts what the job debits at
  a level, per rule instance: one usage for all the matched jobs, or one
  per member of each expanded filter. It is never exceeded: the claim
  debits the instance conditionally (``scope`` is its usage key).
* A limit on a non-consumable (``arch=lx24-amd64``) acts as one more
  offer: a job whose request it does not satisfy cannot run there.
* A dynamic limit (``$num_proc*5``) is computed from the host's value of
  each named complex; it needs an expanded host filter, so each host has
  its own instance.
* Jobs running in an advance reservation are neither limited nor counted
  (sge_resource_quota(5) NOTE): see :func:`exempt`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from wms.core import complexes as cx_rules
from wms.core.complexes import ComplexTable
from wms.core.quotas.filters import SINGULAR, CompiledFilter, Groups
from wms.core.quotas.model import FILTER_KINDS, Limit, Rule, RuleSet

SCOPE_PREFIX = "rqs:"
SHARED = "*"

REASON_EXCEEDS = 'exceeds limit "{label}" ({limit}{who})'


@dataclass(frozen=True)
class JobFacts:
    """What the filters look at: the job's user, project and pe, the queue
    (``Site/CE/Queue``) and host it would run on (None when not known yet)."""

    user: str
    project: str | None
    pe: str | None
    queue: str
    host: str | None

    def value(self, kind: str) -> str | None:
        return {"users": self.user, "projects": self.project, "pes": self.pe, "queues": self.queue,
                "hosts": self.host}[kind]


@dataclass(frozen=True)
class Charge:
    """What a job takes from one rule instance: ``amount`` of ``resource`` within ``capacity``."""

    label: str
    scope: str
    resource: str
    amount: float
    capacity: float
    who: str


@dataclass(frozen=True)
class Refusal:
    """A limit the job cannot run under here; ``lasting`` when only a configuration change alters it."""

    label: str
    resource: str
    reason: str
    lasting: bool


class CompiledRule:
    __slots__ = ("rule", "label", "filters", "expanded")

    def __init__(self, rule_set: RuleSet, index: int, groups: Groups) -> None:
        self.rule = rule_set.rules[index]
        self.label = rule_set.label(index)
        self.filters = tuple(CompiledFilter(kind, flt, groups) for kind in FILTER_KINDS
                             if (flt := self.rule.filter(kind)) is not None)
        self.expanded = tuple(f.kind for f in self.filters if f.expand)

    def matches(self, facts: JobFacts) -> bool:
        for flt in self.filters:
            value = facts.value(flt.kind)
            if flt.kind == "hosts" and value is None:
                return False  # the host is not known yet: host rules are judged when a pilot asks
            if not flt.matches(value):
                return False
        return True

    def instance(self, facts: JobFacts) -> str:
        """The usage instance a job counts in: its own member of each expanded filter."""
        if not self.expanded:
            return SHARED
        return ",".join(f"{kind}={facts.value(kind) or ''}" for kind in self.expanded)

    def scope(self, facts: JobFacts) -> str:
        return f"{SCOPE_PREFIX}{self.label}:{self.instance(facts)}"

    def who(self, facts: JobFacts) -> str:
        parts = [f"{SINGULAR[f.kind]} {facts.value(f.kind) or '-'}" for f in self.filters]
        return f" for {', '.join(parts)}" if parts else ""


class QuotaRules:
    """The enabled rule sets compiled for matching: groups resolved once."""

    def __init__(self, sets: Iterable[RuleSet], groups: Groups, table: ComplexTable) -> None:
        self.sets = [s for s in sets if s.enabled]
        self.table = table
        self.compiled = [[CompiledRule(s, i, groups) for i in range(len(s.rules))] for s in self.sets]

    def __bool__(self) -> bool:
        return any(self.compiled)

    def applying(self, facts: JobFacts) -> list[CompiledRule]:
        """The first matching rule of every enabled set."""
        out = []
        for rules in self.compiled:
            for rule in rules:
                if rule.matches(facts):
                    out.append(rule)
                    break
        return out

    def assess(
        self,
        facts: JobFacts,
        charged: Iterable[tuple[Any, Any]],
        hard: Mapping[str, Any],
        slots: int,
        host_value: Callable[[str], Any],
        usage: Mapping[tuple[str, str], float] | None = None,
    ) -> tuple[list[Charge], Refusal | None]:
        """The charges a job would make and the first limit that refuses it.

        ``charged`` are the (complex, request-or-None) pairs a job is charged
        for at the levels; ``hard`` its hard requests; ``host_value(name)``
        the host's value of a complex (dynamic limits); ``usage`` the
        current usage when known (``wms why``), else the claim decides.
        """
        charges: list[Charge] = []
        requested = {cx.name: value for cx, value in charged}
        for rule in self.applying(facts):
            for limit in rule.rule.limits:
                cx = self.table.get(limit.resource)
                if cx is None:
                    continue
                capacity = limit_value(self.table, limit, host_value)
                if capacity is None:
                    names = ", ".join(f"${t.complex}" for t in limit.terms or () if t.complex)
                    reason = f'limit "{rule.label}" ({limit.resource}={limit.value}) cannot be computed: ' \
                             f"the host does not report {names}"
                    return charges, Refusal(rule.label, cx.name, reason, lasting=False)
                if not cx.is_consumable:
                    if cx.name in hard and not cx_rules.satisfies(cx, hard[cx.name], capacity):
                        text = f"{cx.name}={cx_rules.format_value(cx, capacity)}"
                        reason = REASON_EXCEEDS.format(label=rule.label, limit=text, who=rule.who(facts))
                        return charges, Refusal(rule.label, cx.name, reason, lasting=not limit.dynamic)
                    continue
                if cx.name not in requested:
                    continue
                amount = cx_rules.consumable_amount(cx, requested[cx.name], slots)
                if amount <= 0:
                    continue
                capacity = float(capacity)
                scope = rule.scope(facts)
                used = (usage or {}).get((scope, cx.name), 0.0)
                if amount > capacity or (usage is not None and not cx_rules.fits(amount, capacity, used)):
                    reason = full_reason(self.table, rule.label, cx.name, used, capacity, rule.who(facts))
                    return charges, Refusal(rule.label, cx.name, reason,
                                            lasting=amount > capacity and not limit.dynamic)
                charges.append(Charge(rule.label, scope, cx.name, amount, capacity, rule.who(facts)))
        return charges, None


def full_reason(table: ComplexTable, label: str, resource: str, used: float, capacity: float, who: str) -> str:
    """``exceeds limit "ruleset1/3" (compiler_lic=1/1 for user bob)``."""
    cx = table.resolve(resource)
    limit = f"{resource}={cx_rules.format_value(cx, used)}/{cx_rules.format_value(cx, capacity)}"
    return REASON_EXCEEDS.format(label=label, limit=limit, who=who)


def limit_value(table: ComplexTable, limit: Limit, host_value: Callable[[str], Any]) -> Any:
    """A static limit's value in its type, or a dynamic one computed from the host (None if it cannot be)."""
    cx = table.resolve(limit.resource)
    if not limit.dynamic:
        return cx_rules.parse_value(cx, limit.value)
    total = 0.0
    for term in limit.terms or ():
        factor = 1.0
        if term.complex is not None:
            value = host_value(term.complex)
            if value is None:
                return None
            factor = float(value)
        total += term.sign * term.weight * factor
    return max(total, 0.0)


def exempt(definition: Mapping[str, Any]) -> bool:
    """Jobs of an advance reservation are neither limited nor counted (sge_resource_quota(5)).

    The task queue keeps the job's ``reservation`` id (JDL ``Reservation``,
    ``-ar``); a job with one runs inside the reservation's own resources.
    """
    return definition.get("reservation") not in (None, "", 0)


def parse_scope(scope: str) -> tuple[str, str] | None:
    """``rqs:set/rule:instance`` -> (label, instance); None for other scopes."""
    if not scope.startswith(SCOPE_PREFIX):
        return None
    label, _, instance = scope[len(SCOPE_PREFIX):].partition(":")
    return label, instance
