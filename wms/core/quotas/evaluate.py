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
from wms.core.quotas.model import FILTER_KINDS, Limit, RuleSet
from wms.core.reasons import Reason
from wms.core.task_queues import TaskQueueDefinition

SCOPE_PREFIX = "rqs:"
# How many (job, queue, host) answers are kept before starting afresh.
APPLYING_KEPT = 100_000
SHARED = "*"

REASON_EXCEEDS = Reason("quota-exceeded", 'exceeds limit "{label}" ({limit}{who})')
REASON_UNCOMPUTABLE = Reason("quota-limit-unknown", 'limit "{label}" ({resource}={value}) cannot be computed: '
                             "the host does not report {names}")


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
    why: Reason
    detail: Mapping[str, Any]
    lasting: bool

    @property
    def reason(self) -> str:
        return self.why.format(**self.detail)


class CompiledRule:
    __slots__ = ("rule", "label", "filters", "host_filter", "other_filters", "expanded", "limits")

    def __init__(self, rule_set: RuleSet, index: int, groups: Groups, table: ComplexTable) -> None:
        self.rule = rule_set.rules[index]
        self.label = rule_set.label(index)
        self.filters = tuple(CompiledFilter(kind, flt, groups) for kind in FILTER_KINDS
                             if (flt := self.rule.filter(kind)) is not None)
        self.host_filter = next((f for f in self.filters if f.kind == "hosts"), None)
        self.other_filters = tuple(f for f in self.filters if f.kind != "hosts")
        self.expanded = tuple(f.kind for f in self.filters if f.expand)
        # (limit, complex, static value or None for a dynamic limit), read once.
        self.limits = tuple((lim, cx, None if lim.dynamic else cx_rules.parse_value(cx, lim.value))
                            for lim in self.rule.limits if (cx := table.get(lim.resource)) is not None)

    def matches_without_host(self, facts: JobFacts) -> bool:
        return all(flt.matches(facts.value(flt.kind)) for flt in self.other_filters)

    def matches_host(self, host: str | None) -> bool:
        if self.host_filter is None:
            return True
        if host is None:
            return False  # the host is not known yet: host rules are judged when a pilot asks
        return self.host_filter.matches(host)

    def matches(self, facts: JobFacts) -> bool:
        return self.matches_without_host(facts) and self.matches_host(facts.host)

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
    """The enabled rule sets compiled for matching: groups resolved once.

    For each job and queue the rules that can apply whatever the host are
    worked out once and kept (``_candidates``); a request then only tests
    the host filters of those few rules.
    """

    def __init__(self, sets: Iterable[RuleSet], groups: Groups, table: ComplexTable) -> None:
        self.sets = [s for s in sets if s.enabled]
        self.table = table
        self.compiled = [[CompiledRule(s, i, groups, table) for i in range(len(s.rules))] for s in self.sets]
        self._candidates: dict[tuple, tuple[tuple[CompiledRule, ...], ...]] = {}
        self._amounts: dict[Any, dict[str, float]] = {}
        self._applying: dict[tuple, list[CompiledRule]] = {}

    def __bool__(self) -> bool:
        return any(self.compiled)

    def candidates(self, facts: JobFacts) -> tuple[tuple[CompiledRule, ...], ...]:
        """Per set, the rules matching all but the host filter, up to the first without a host filter."""
        key = (facts.user, facts.project, facts.pe, facts.queue)
        found = self._candidates.get(key)
        if found is None:
            per_set = []
            for rules in self.compiled:
                chosen = []
                for rule in rules:
                    if rule.matches_without_host(facts):
                        chosen.append(rule)
                        if rule.host_filter is None:
                            break
                per_set.append(tuple(chosen))
            found = self._candidates[key] = tuple(per_set)
        return found

    def amounts(self, charged: Iterable[tuple[Any, Any]], slots: int, key: Any = None) -> dict[str, float]:
        """What the job debits of each consumable (complex(5) rules), kept per ``key`` when given."""
        found = self._amounts.get(key) if key is not None else None
        if found is None:
            found = {cx.name: cx_rules.consumable_amount(cx, value, slots) for cx, value in charged
                     if cx.is_consumable}
            if key is not None:
                self._amounts[key] = found
        return found

    def applying(self, facts: JobFacts) -> list[CompiledRule]:
        """The first matching rule of every enabled set (kept per job, queue and host)."""
        key = (facts.user, facts.project, facts.pe, facts.queue, facts.host)
        out = self._applying.get(key)
        if out is None:
            out = []
            for rules in self.candidates(facts):
                for rule in rules:
                    if rule.matches_host(facts.host):
                        out.append(rule)
                        break
            if len(self._applying) >= APPLYING_KEPT:
                self._applying.clear()  # many hosts: start afresh rather than grow without bound
            self._applying[key] = out
        return out

    def assess(
        self,
        facts: JobFacts,
        charged: Iterable[tuple[Any, Any]],
        hard: Mapping[str, Any],
        slots: int,
        host_value: Callable[[str], Any],
        usage: Mapping[tuple[str, str], float] | None = None,
        key: Any = None,
    ) -> tuple[list[Charge], Refusal | None]:
        """The charges a job would make and the first limit that refuses it.

        ``charged`` are the (complex, request-or-None) pairs a job is charged
        for at the levels; ``hard`` its hard requests; ``host_value(name)``
        the host's value of a complex (dynamic limits); ``usage`` the
        current usage when known (``wms why``), else the claim decides;
        ``key`` names the job's (charged, slots) for caching its amounts.
        """
        charges: list[Charge] = []
        amounts: dict[str, float] | None = None
        for rule in self.applying(facts):
            for limit, cx, static in rule.limits:
                capacity = static if limit.terms is None else dynamic_value(limit, host_value)
                if capacity is None:
                    names = ", ".join(f"${t.complex}" for t in limit.terms or () if t.complex)
                    detail = {"label": rule.label, "resource": limit.resource, "value": limit.value, "names": names}
                    return charges, Refusal(rule.label, cx.name, REASON_UNCOMPUTABLE, detail, lasting=False)
                if not cx.is_consumable:
                    if cx.name in hard and not cx_rules.satisfies(cx, hard[cx.name], capacity):
                        detail = {"label": rule.label, "limit": f"{cx.name}={cx_rules.format_value(cx, capacity)}",
                                  "who": rule.who(facts)}
                        return charges, Refusal(rule.label, cx.name, REASON_EXCEEDS, detail,
                                                lasting=not limit.dynamic)
                    continue
                if amounts is None:
                    amounts = self.amounts(charged, slots, key)
                amount = amounts.get(cx.name, 0.0)
                if amount <= 0:
                    continue
                capacity = float(capacity)
                scope = rule.scope(facts)
                used = (usage or {}).get((scope, cx.name), 0.0)
                if amount > capacity or (usage is not None and not cx_rules.fits(amount, capacity, used)):
                    detail = full_detail(self.table, rule.label, cx.name, used, capacity, rule.who(facts))
                    return charges, Refusal(rule.label, cx.name, REASON_EXCEEDS, detail,
                                            lasting=amount > capacity and not limit.dynamic)
                charges.append(Charge(rule.label, scope, cx.name, amount, capacity, rule.who(facts)))
        return charges, None


    def held(self, facts: JobFacts, charged: Iterable[tuple[Any, Any]], slots: int) -> list[tuple[str, str, float]]:
        """(scope, resource, amount) a job that runs holds of every rule instance applying to it.

        Counted whatever the limits say: a set added or enabled while jobs
        run counts them all, even past its limit (no new job is then
        matched until usage is below it again).
        """
        amounts = self.amounts(charged, slots)
        return [(rule.scope(facts), cx.name, amounts[cx.name])
                for rule in self.applying(facts) for _, cx, _ in rule.limits
                if cx.is_consumable and amounts.get(cx.name, 0.0) > 0]


def full_detail(table: ComplexTable, label: str, resource: str, used: float, capacity: float,
                who: str) -> dict[str, Any]:
    """What fills REASON_EXCEEDS for a full instance: ``exceeds limit "ruleset1/3" (compiler_lic=1/1 for user bob)``."""
    cx = table.resolve(resource)
    limit = f"{resource}={cx_rules.format_value(cx, used)}/{cx_rules.format_value(cx, capacity)}"
    return {"label": label, "limit": limit, "who": who, "used": used, "capacity": capacity}


def limit_value(table: ComplexTable, limit: Limit, host_value: Callable[[str], Any]) -> Any:
    """A static limit's value in its type, or a dynamic one computed from the host (None if it cannot be)."""
    if not limit.dynamic:
        return cx_rules.parse_value(table.resolve(limit.resource), limit.value)
    return dynamic_value(limit, host_value)


def dynamic_value(limit: Limit, host_value: Callable[[str], Any]) -> float | None:
    """``{w|$complex[*w]}[{+|-}..]`` with the host's values; None when the host lacks one."""
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


def exempt(definition: TaskQueueDefinition) -> bool:
    """Jobs of an advance reservation are neither limited nor counted (sge_resource_quota(5)).

    The task queue keeps the job's ``reservation`` id (JDL ``Reservation``,
    ``-ar``); a job with one runs inside the reservation's own resources.
    """
    return definition.reservation is not None


def parse_scope(scope: str) -> tuple[str, str] | None:
    """``rqs:set/rule:instance`` -> (label, instance); None for other scopes."""
    if not scope.startswith(SCOPE_PREFIX):
        return None
    label, _, instance = scope[len(SCOPE_PREFIX):].partition(":")
    return label, instance
