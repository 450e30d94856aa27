"""Grid Engine's three levels in a pilot world (DESIGN.md; specs/000).

* global: the whole system, cluster.yaml ``global.complex_values``;
* host: the pilot's worker node: the load values the pilot measured
  (num_proc, mem_free, arch, ...), its free slots and the CPU time it has
  left (as ``h_rt``), overridden by cluster.yaml ``hosts`` entries for
  that host or a host group holding it, by the rules of section 3;
* queue: one Site/CE/Queue as a whole: its ``complex_values`` in
  resources.yaml (``slots: 100`` = at most 100 slots in use there at
  once, across all pilots) and ``qname``.

Requests are checked level by level, strictly global -> host -> queue; the
first level that denies ends the evaluation (``offers.check_hierarchy``, shared
with the grant of an advance reservation).
Consumables are checked against capacity minus the usage read for this
request; the claim's conditional debits are the real guard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from wms.core import complexes as cx_rules
from wms.core.complexes import Complex, ComplexTable
from wms.core.offers import (
    GLOBAL,
    HOST,
    LEVEL_ORDER,
    QUEUE,
    LevelValues,
    charged,
    check_hierarchy,
    offers,
    request_shortfall,
)
from wms.core.errors import InvalidInput
from wms.core.groups import groups_of
from wms.core.quantities import time_limit
from wms.core.resources import QueueRef
from wms.core.scheduling import SchedulingRequest
from wms.core.task_queues import TaskQueueDefinition
from wms.core.match.context import (
    GLOBAL_SCOPE,
    MatchContext,
    PilotRequest,
    TaskQueueView,
    host_scope,
    queue_scope,
)
from wms.core.match.layer import BaseLayer, Debit
from wms.core.match.verdict import ALLOW, Code, Verdict, never, not_now
from wms.core.reasons import Reason

# Amounts in the details are shown as the complex's type reads them (4G, 2:00:00).
REASON_INVALID_DEFINITION = Reason("invalid-definition", "the task queue's definition is invalid: {error}")
REASON_FORCED = Reason("forced-not-requested", "{names} must be requested to run here ({level} level)")
REASON_FULL = Reason("consumable-full", "{level} {resource}: {amount} needed, {free} of {capacity} free")
REASON_TOO_BIG = Reason("consumable-too-big", "{level} {resource}: {amount} needed, only {capacity} in total")
REASON_EXCLUSIVE_HELD = Reason("exclusive-held", "{level} {resource}: {jobs} there exclusively")
REASON_EXCLUSIVE_BUSY = Reason("exclusive-busy",
                               "{level} {resource}: an exclusive job needs it to itself, but {jobs} there")
REASON_EXCLUSIVE_NOWHERE = Reason("exclusive-nowhere",
                                  "{resource}=TRUE requested, but no level of host {host} or this queue offers it")


# ---------------------------------------------------------------- building the levels
def parse_values(table: ComplexTable, values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Configured or measured values by canonical complex name; unknown names are refused."""
    out: dict[str, Any] = {}
    for key, raw in values.items():
        cx = table.get(key)
        if cx is None:
            raise InvalidInput(f"unknown resource {key!r}", where=where)
        out[cx.name] = cx_rules.parse_value(cx, raw, where=f"{where}.{key}")
    return out


def parse_load(table: ComplexTable, load: Mapping[str, Any]) -> dict[str, Any]:
    """The pilot's load values; names the table does not know are ignored (pilots may report more)."""
    out: dict[str, Any] = {}
    for key, raw in load.items():
        cx = table.get(key)
        if cx is None or raw is None:
            continue
        out[cx.name] = cx_rules.parse_value(cx, raw, where=f"load.{key}")
    return out


def host_configuration(cluster: Any, host: str) -> dict[str, Any]:
    """cluster.yaml values for a host: those of host groups holding it, then its own (more specific wins)."""
    merged: dict[str, Any] = {}
    hosts = cluster.hosts
    for group in groups_of(cluster.hostgroups, host):
        if group in hosts:
            merged.update(hosts[group].complex_values)
    if host in hosts:
        merged.update(hosts[host].complex_values)
    return merged


def global_level(table: ComplexTable, cluster: Any) -> LevelValues:
    return LevelValues(GLOBAL, parse_values(table, cluster.global_.complex_values, "global.complex_values"),
                       scope=GLOBAL_SCOPE)


def queue_level(table: ComplexTable, ref: QueueRef, queue_complex_values: Mapping[str, Any]) -> LevelValues:
    fixed = parse_values(table, queue_complex_values, f"{ref.name}.complex_values")
    fixed.setdefault("qname", ref.name)
    return LevelValues(QUEUE, fixed, scope=queue_scope(ref))


def host_level(table: ComplexTable, cluster: Any, request: PilotRequest) -> LevelValues:
    """The pilot's node: its measured values, and cluster.yaml's for it if any."""
    configured = host_configuration(cluster, request.host)
    load = parse_load(table, request.load)
    load["hostname"] = request.host
    load["slots"] = request.slots
    if request.cpu_time_left is not None:
        load.setdefault("h_rt", float(request.cpu_time_left))
    return LevelValues(HOST, parse_values(table, configured, f"hosts.{request.host}"), load=load,
                       scope=host_scope(request.host) if configured else None)


def build_levels(
    table: ComplexTable, cluster: Any, queue_complex_values: Mapping[str, Any], request: PilotRequest
) -> tuple[LevelValues, ...]:
    return (global_level(table, cluster), host_level(table, cluster, request),
            queue_level(table, request.ref, queue_complex_values))


def task_queue_view(definition: TaskQueueDefinition, table: ComplexTable, tq_id: int = 0,
                    priority: int = 1) -> TaskQueueView:
    """A task queue's definition with its requests parsed once (invalid ones are kept as the reason);
    ``tq_id`` 0 for one not stored yet (no stored task queue has that id)."""
    try:
        hard = cx_rules.validate_requests(table, definition.hard_requests)
        soft = cx_rules.validate_requests(table, definition.soft_requests, where="SoftResourceRequests")
    except InvalidInput as exc:
        return _invalid_view(tq_id, priority, definition, table, str(exc))
    return TaskQueueView(tq_id, priority, definition, hard, soft, charged=charged(table, hard))


def _invalid_view(tq_id: int, priority: int, definition: TaskQueueDefinition, table: ComplexTable,
                  why: str) -> TaskQueueView:
    """A task queue no queue takes any more; the jobs of it already running are still charged
    the consumables' defaults (the quota recount counts them)."""
    return TaskQueueView(tq_id, priority, definition, {}, {}, charged=charged(table, {}), invalid=why)


def stored_task_queue_view(row: Mapping[str, Any], table: ComplexTable) -> TaskQueueView:
    """A stored task queue (its row); a definition that cannot be read back is kept as the reason."""
    try:
        definition = TaskQueueDefinition.from_stored(row["definition"])
    except InvalidInput as exc:
        bare = TaskQueueDefinition(row["owner"], row["owner_group"], row["vo"], row["submit_pool"],
                                   SchedulingRequest(cpu_time=row["cpu_time"]))
        return _invalid_view(row["tq_id"], row["priority"], bare, table, str(exc))
    return task_queue_view(definition, table, row["tq_id"], row["priority"])


# ---------------------------------------------------------------- the checks
# ---------------------------------------------------------------- exclusive complexes (EXCL)
# complex(5): an EXCL comparison holds for a job asking to be exclusive only
# when no other job, exclusive or not, uses the complex; for any other job
# only when no exclusive job does. "Uses" means runs at the level that
# defines the complex (Grid Engine counts every job there implicitly). Two
# usage rows per level make that two conditional debits, so the claim guards
# it like any consumable: ``NAME`` counts the exclusive jobs (capacity 1) and
# ``NAME@jobs`` every job there ("@" cannot occur in a complex name).
#   exclusive job:     NAME +1 within 1,  NAME@jobs +0 within 0 (no job there)
#   any other job:     NAME +0 within 0 (no exclusive job),  NAME@jobs +1
JOBS_SUFFIX = "@jobs"
# A bound no count of jobs at one level reaches; finite, as MariaDB's DOUBLE must be.
JOBS_CAPACITY = 1e15


def jobs_resource(name: str) -> str:
    return name + JOBS_SUFFIX


@dataclass(frozen=True)
class ExclusiveDebit(Debit):
    """A debit of an EXCL complex or of its job count; ``exclusive`` says which kind of job takes it."""

    complex_name: str = ""
    exclusive: bool = False


def offers_exclusivity(level: LevelValues, cx: Complex) -> bool:
    return cx.relop is cx_rules.Relop.EXCL and bool(level.fixed.get(cx.name))


def asks_exclusivity(cx: Complex, tq: TaskQueueView) -> bool:
    return cx_rules.consumable_amount(cx, tq.hard.get(cx.name), tq.slots) > 0


def exclusive_debits(ctx: MatchContext, tq: TaskQueueView, level: LevelValues) -> list[Debit]:
    """Every job takes its part of each EXCL complex the level offers (see above)."""
    out: list[Debit] = []
    if level.scope is None:
        return out
    for name in level.fixed:
        cx = ctx.complexes.get(name)
        if cx is None or not offers_exclusivity(level, cx):
            continue
        mine = asks_exclusivity(cx, tq)
        out.append(ExclusiveDebit(level.level, level.scope, cx.name, 1.0 if mine else 0.0, 1.0 if mine else 0.0,
                                  complex_name=cx.name, exclusive=mine))
        out.append(ExclusiveDebit(level.level, level.scope, jobs_resource(cx.name), 0.0 if mine else 1.0,
                                  0.0 if mine else JOBS_CAPACITY, complex_name=cx.name, exclusive=mine))
    return out


def exclusive_verdict_of(level: str, name: str, exclusive: bool, holders: list[int], count: float) -> Verdict:
    """Why an EXCL comparison fails: the exclusive job there, or the jobs an exclusive job would share with."""
    shown = ", ".join(str(j) for j in holders)
    more = max(int(count) - len(holders), 0)
    if more:
        shown += f" and {more} more"
    if not holders:
        shown = f"{int(count)}"
    plural = int(count) != 1 or not holders
    jobs = f"job{'s' if plural else ''} {shown} run{'' if plural else 's'}"
    return not_now(level, REASON_EXCLUSIVE_BUSY if exclusive else REASON_EXCLUSIVE_HELD, level=level, resource=name,
                   jobs=jobs, holders=holders, used=count)


def exclusive_verdict(ctx: MatchContext, debit: ExclusiveDebit, used: float, holders: list[int]) -> Verdict:
    """An EXCL debit that did not fit, naming the jobs in the way."""
    return exclusive_verdict_of(debit.level, debit.complex_name, debit.exclusive, holders, used)


def _exclusive_check(ctx: MatchContext, tq: TaskQueueView, level: LevelValues) -> Verdict:
    """The EXCL complexes of one level against the usage read for this request (``wms why``).

    On the host level (when a pilot asks) a job asking to be exclusive also
    needs some level to offer the complex: exclusivity nobody grants is none.
    """
    if level.level == HOST and ctx.request.host:
        for asked, _ in tq.charged:
            if asked.relop is cx_rules.Relop.EXCL and asks_exclusivity(asked, tq) \
                    and not any(offers_exclusivity(lv, asked) for lv in ctx.levels):
                return not_now(HOST, REASON_EXCLUSIVE_NOWHERE, resource=asked.name, host=ctx.request.host)
    if level.scope is None:
        return ALLOW
    for name in level.fixed:
        cx = ctx.complexes.get(name)
        if cx is None or not offers_exclusivity(level, cx):
            continue
        mine = asks_exclusivity(cx, tq)
        for key in [(level.scope, cx.name)] + ([(level.scope, jobs_resource(cx.name))] if mine else []):
            used = ctx.usage.get(key, 0.0)
            if used > 0:
                return exclusive_verdict_of(level.level, cx.name, mine, list(ctx.holders.get(key, ())), used)
    return ALLOW


def full_verdict(ctx: MatchContext, debit: Debit, used: float) -> Verdict:
    """A debit that did not fit: which level, how much was needed and free."""
    cx = ctx.complexes.resolve(debit.resource)
    return not_now(debit.level, REASON_FULL, level=debit.level, resource=debit.resource,
                   free=cx_rules.format_value(cx, max(debit.capacity - used, 0)),
                   amount=cx_rules.format_value(cx, debit.amount), capacity=cx_rules.format_value(cx, debit.capacity),
                   used=used)


def _consumable_check(ctx: MatchContext, cx: Complex, amount: float, level: LevelValues) -> Verdict:
    capacity = level.fixed.get(cx.name, level.load.get(cx.name))
    if capacity is None or amount <= 0:
        return ALLOW
    capacity = float(capacity)
    used = ctx.usage.get((level.scope, cx.name), 0.0) if level.scope else 0.0
    too_big = amount > capacity
    if not too_big and cx_rules.fits(amount, capacity, used):
        return ALLOW            # the common case: nothing to show, so nothing formatted
    shown = {"level": level.level, "resource": cx.name, "amount": cx_rules.format_value(cx, amount),
             "capacity": cx_rules.format_value(cx, capacity)}
    if too_big:
        make = never if level.level != HOST else not_now
        return make(level.level, REASON_TOO_BIG, **shown)
    return not_now(level.level, REASON_FULL, free=cx_rules.format_value(cx, max(capacity - used, 0)), used=used,
                   **shown)


def check_level(ctx: MatchContext, tq: TaskQueueView, level_name: str) -> Verdict:
    """The hard requests of ``tq`` on one level (the levels above already passed)."""
    if tq.invalid is not None:
        return never(level_name, REASON_INVALID_DEFINITION, error=tq.invalid)
    table = ctx.complexes
    level = next(lv for lv in ctx.levels if lv.level == level_name)
    forced = cx_rules.forced_missing(table, tq.hard.keys(), [*level.fixed.keys(), *level.load.keys()])
    if forced:
        return never(level_name, REASON_FORCED, names=", ".join(forced), level=level_name)
    for cx, requested in tq.charged:
        if cx.relop is cx_rules.Relop.EXCL:
            continue            # _exclusive_check below
        if cx.is_consumable:
            amount = cx_rules.consumable_amount(cx, requested, tq.slots)
            verdict = _consumable_check(ctx, cx, amount, level)
            if not verdict.allowed:
                return verdict
            continue
        shortfall = request_shortfall(cx, requested, ctx.levels, level_name)
        if shortfall is None:
            continue
        if shortfall.level is None and not ctx.request.host:
            continue  # judged without a pilot (wms why): the host may offer it
        if shortfall.level == level_name or (shortfall.level is None and level_name == QUEUE):
            # Offered nowhere, with a pilot's host among the levels: another
            # host of the queue may offer it, so this is about this pilot.
            lasting = shortfall.level not in (HOST, None) and shortfall.source != "load"
            code = Code.NEVER if lasting else Code.NOT_NOW
            why, detail = shortfall.why()
            return Verdict(code, level_name, why, detail)
    return _exclusive_check(ctx, tq, level)


class LevelLayer(BaseLayer):
    """One Grid Engine level as a layer of the framework."""

    def __init__(self, level: str) -> None:
        self.name = level

    def static(self, ctx: MatchContext, tq: TaskQueueView) -> Verdict:
        """What configuration alone decides here (NEVER), for the cache.

        Host values come from the pilot, so only global and queue are
        judged; a request that fails there fails on every pilot of the
        queue (a lower level can only narrow, specs/000 section 3).
        """
        if self.name == HOST:
            return ALLOW
        verdict = check_level(ctx, tq, self.name)
        return verdict if verdict.code is Code.NEVER else ALLOW

    def check(self, ctx: MatchContext, tq: TaskQueueView) -> Verdict:
        if self.name == HOST and ctx.without_pilot:
            return ALLOW
        return check_level(ctx, tq, self.name)

    def debits(self, ctx: MatchContext, tq: TaskQueueView) -> list[Debit]:
        """Every consumable the job takes at this level, if the level is accounted."""
        level = next(lv for lv in ctx.levels if lv.level == self.name)
        if level.scope is None:
            return []
        return _level_debits(tq, level) + exclusive_debits(ctx, tq, level)


class QueueLevelLayer(LevelLayer):
    """The queue level, which also scores the soft requests (the framework's
    score phase). A soft request is judged against the whole hierarchy, as
    a hard one is by the time the queue level is checked, so one level
    scores it, the last: three would count each miss three times."""

    def __init__(self) -> None:
        super().__init__(QUEUE)

    def score(self, ctx: MatchContext, tq: TaskQueueView) -> int:
        return soft_violations(ctx, tq) if tq.soft else 0


LEVEL_LAYERS = tuple(QueueLevelLayer() if level == QUEUE else LevelLayer(level) for level in LEVEL_ORDER)


def soft_violations(ctx: MatchContext, tq: TaskQueueView) -> int:
    """How many soft requests this pilot's levels do not meet."""
    count = 0
    for name, value in tq.soft.items():
        cx = ctx.complexes.resolve(name)
        offered = offers(cx, ctx.levels, QUEUE)
        if cx.is_consumable:
            amount = cx_rules.consumable_amount(cx, value, tq.slots)
            if any(not _consumable_check(ctx, cx, amount, lv).allowed for lv in ctx.levels):
                count += 1
        elif not offered or check_hierarchy(cx, value, offered) is not None:
            count += 1
    return count


def _level_debits(tq: TaskQueueView, level: LevelValues) -> list[Debit]:
    out: list[Debit] = []
    if level.scope is None:
        return out
    for cx, requested in tq.charged:
        name = cx.name
        if not cx.is_consumable or cx.relop is cx_rules.Relop.EXCL or name not in level.fixed:
            continue
        amount = cx_rules.consumable_amount(cx, requested, tq.slots)
        if amount > 0:
            out.append(Debit(level.level, level.scope, name, amount, float(level.fixed[name])))
    return out


def limits(tq: TaskQueueView, cpu_time: int | None) -> dict[str, float | None]:
    """What the pilot enforces: wall-clock h_rt/s_rt from the requests, the job's CPUTime."""
    return {"h_rt": time_limit(tq.hard.get("h_rt")), "s_rt": time_limit(tq.hard.get("s_rt")),
            "cpu_time": float(cpu_time) if cpu_time else None}
