"""The match framework (core/match/framework.py): one order, two phases, one
evaluator; and each layer alone, table-driven."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from wms.core.complexes import ComplexTable
from wms.core.match import framework, levels
from wms.core.match.context import MatchContext, PilotRequest, TaskQueueView, with_free_slots
from wms.core.match.layer import BaseLayer, Debit, QueueLayer, ScoreLayer
from wms.core.match.pools import REASON_POOL, PoolRules, PoolsLayer, listed_reason
from wms.core.match.requirements import (
    REASON_CPU_TIME_LEFT, REASON_EXPRESSION, REASON_EXPRESSION_STATIC, REASON_PILOT_PLATFORM, RequirementsLayer,
)
from wms.core.match.verdict import ALLOW, Code, never, not_now
from wms.core.resources import ParameterMap
from wms.core.offers import charged
from wms.core.scheduling import REASON_CPUTIME, REASON_SITE, SchedulingRequest
from wms.core.task_queues import TaskQueueDefinition

TABLE = ComplexTable.builtin()
QUEUE_PARAMS = {"CPUTime": 3600, "Platform": "x86_64-el9", "MaxRAM": 2000, "complex_values": {}}


def request(host="wn1", pools=None, **pilot) -> PilotRequest:
    return PilotRequest(site="S", ce="c", queue="q", host=host, pilot_id="p", pools=pools, **pilot)


def context(req: PilotRequest | None = None, queue_values=None, host_values=None) -> MatchContext:
    req = req or request()
    cluster = SimpleNamespace(global_=SimpleNamespace(complex_values={}), hostgroups={},
                              hosts={req.host: SimpleNamespace(complex_values=host_values)} if host_values else {})
    resources = SimpleNamespace(queue_parameter_map=lambda ref: ParameterMap(QUEUE_PARAMS))
    return MatchContext(request=req, levels=levels.build_levels(TABLE, cluster, queue_values or {}, req),
                        usage={}, complexes=TABLE, pilot_ad=req.ad(), resources_for=lambda vo: resources)


def task_queue(tq_id=1, pool=None, hard=None, requirements_expr=None, **request) -> TaskQueueView:
    """A task queue of user u; ``request`` is its SchedulingRequest's (sites, cpu_time, ...)."""
    hard = hard or {}
    definition = TaskQueueDefinition("u", "g", "vo", pool, SchedulingRequest(**request),
                                     requirements_expr=requirements_expr, hard_requests=hard)
    return TaskQueueView(tq_id, 1, definition, hard, {}, charged=charged(TABLE, hard))


class Fake(BaseLayer):
    """A layer whose answers are given; counts how often it is asked."""

    def __init__(self, name, static=ALLOW, check=ALLOW, debits=(), adjust=None):
        self.name, self._static, self._check, self._debits, self._adjust = name, static, check, list(debits), adjust
        self.asked = 0

    def static(self, ctx, tq):
        self.asked += 1
        if isinstance(self._static, Exception):
            raise self._static
        return self._static

    def check(self, ctx, tq):
        return self._check

    def debits(self, ctx, tq):
        return self._debits

    def adjust(self, ctx, tq, debits):
        return self._adjust(debits) if self._adjust else list(debits)


def test_the_one_order_of_the_layers():
    assert [layer.name for layer in framework.LAYERS] == [
        "pools", "reservation", "quota", "global", "host", "queue", "requirements"]


@pytest.mark.parametrize("layers, decided", [
    ([Fake("a"), Fake("b")], ("", Code.OK)),
    ([Fake("a", check=not_now("a", "busy")), Fake("b", check=not_now("b", "full"))], ("a", Code.NOT_NOW)),
    # A denial of the static phase outranks any of the request phase, whatever the order.
    ([Fake("a", check=not_now("a", "busy")), Fake("b", static=never("b", "never here"))], ("b", Code.NEVER)),
    ([Fake("a", static=never("a", "x")), Fake("b", static=never("b", "y"))], ("a", Code.NEVER)),
    ([Fake("a", static=RuntimeError("boom")), Fake("b")], ("a", Code.ERROR)),
])
def test_the_first_denial_decides_and_every_layer_can_be_reported(layers, decided):
    ctx, tq = context(), task_queue()
    first = framework.evaluate(layers, ctx, tq)
    every = framework.evaluate(layers, ctx, tq, stop_at_first=False)
    assert (first.verdict.layer, first.verdict.code) == decided
    assert every.verdict == first.verdict                      # the same decision, however asked
    assert [name for name, _ in every.layers] == [layer.name for layer in layers]


def test_a_layer_that_raises_is_an_error_of_that_layer():
    verdict = framework.evaluate([Fake("broken", static=KeyError("x"))], context(), task_queue()).verdict
    assert verdict.code is Code.ERROR and verdict.layer == "broken" and "KeyError" in verdict.reason


def test_static_only_never_asks_the_request_phase():
    layers = [Fake("a", check=not_now("a", "busy"))]
    assert framework.evaluate(layers, context(), task_queue(), static_only=True).allowed


def test_static_verdicts_are_cached_per_task_queue_queue_and_pools_but_not_errors():
    layer = Fake("a", static=never("a", "no"))
    cache = framework.StaticVerdicts()
    for _ in range(3):
        framework.evaluate([layer], context(request(pools=("P",))), task_queue(), cache=cache)
    framework.evaluate([layer], context(request(pools=("Q",))), task_queue(), cache=cache)
    assert layer.asked == 2 and len(cache) == 2
    failing = Fake("b", static=RuntimeError("db down"))
    for _ in range(2):
        framework.evaluate([failing], context(), task_queue(), cache=cache)
    assert failing.asked == 2


def test_the_static_phase_never_sees_the_pilot():
    """Cached for every pilot of a queue, it must not depend on the first one's host."""
    seen = []

    class Spy(BaseLayer):
        name = "spy"

        def static(self, ctx, tq):
            seen.append((ctx.request.host, ctx.request.platform, dict(ctx.levels[1].fixed)))
            return ALLOW

    framework.evaluate([Spy()], context(request(platform="x86_64-el9"), host_values={"num_proc": 8}), task_queue())
    assert seen == [("", None, {})]


def test_debits_of_every_layer_adjusted_then_in_key_order():
    a = Fake("a", debits=[Debit("queue", "queue:S/c/q", "slots", 1, 10)])
    b = Fake("b", debits=[Debit("global", "global", "slots", 1, 100)],
             adjust=lambda ds: [Debit(d.level, d.scope, d.resource, d.amount, d.capacity - 1) for d in ds])
    assert framework.debits([a, b], context(), task_queue()) == [
        Debit("global", "global", "slots", 1, 99), Debit("queue", "queue:S/c/q", "slots", 1, 9)]


# ---------------------------------------------------------------- the layers alone
@pytest.mark.parametrize("pools, pool, code, reason", [
    (None, "P1", Code.OK, ""),                  # the request names no pools
    (("P1",), None, Code.OK, ""),               # a task queue without a pool goes anywhere
    (("P1", "P2"), "P2", Code.OK, ""),
    (("P1",), "P2", Code.NEVER, REASON_POOL.format(pool="P2")),
    ((), "P2", Code.NEVER, REASON_POOL.format(pool="P2")),
])
def test_pools_layer(pools, pool, code, reason):
    verdict = PoolsLayer().static(context(request(pools=pools)), task_queue(pool=pool))
    assert (verdict.code, verdict.reason) == (code, reason)


@pytest.mark.parametrize("definition, pilot, phase, code, reason", [
    ({}, {}, "static", Code.OK, ""),
    ({"sites": ("T",)}, {}, "static", Code.NEVER, REASON_SITE),
    ({"cpu_time": 7200}, {}, "static", Code.NEVER, REASON_CPUTIME),
    ({"requirements_expr": "other.MaxRAM >= 4000"}, {}, "static", Code.NEVER, REASON_EXPRESSION_STATIC.format()),
    ({"requirements_expr": "other.MaxRAM >= 1000"}, {}, "static", Code.OK, ""),
    ({"platforms": ("x86_64-el9",)}, {"platform": "x86_64-el8"}, "check", Code.NOT_NOW,
     REASON_PILOT_PLATFORM.format(platform="x86_64-el8", wanted="x86_64-el9")),
    ({"cpu_time": 600}, {"cpu_time_left": 300}, "check", Code.NOT_NOW, REASON_CPU_TIME_LEFT.format(needed=600, left=300)),
    ({"requirements_expr": "other.FreeSlots >= 4"}, {"slots": 2}, "check", Code.NOT_NOW, REASON_EXPRESSION.format()),
    ({"requirements_expr": "other.FreeSlots >= 4"}, {"slots": 4}, "check", Code.OK, ""),
])
def test_requirements_layer(definition, pilot, phase, code, reason):
    ctx = context(request(**pilot))
    verdict = getattr(RequirementsLayer(), phase)(ctx, task_queue(**definition))
    assert (verdict.code, verdict.reason) == (code, reason)


def test_a_verdict_names_its_reason_by_code_and_carries_the_details():
    verdict = RequirementsLayer().check(context(request(cpu_time_left=300)), task_queue(cpu_time=600))
    assert verdict.why is REASON_CPU_TIME_LEFT and verdict.reason_code == "pilot-cpu-time"
    assert dict(verdict.detail) == {"needed": 600, "left": 300}
    assert verdict.reason == "job needs 600 s of CPU time, the pilot has 300 s left"


def test_requirements_of_the_pilot_wait_for_a_pilot():
    ctx = context(request(host=""))
    assert RequirementsLayer().check(ctx, task_queue(requirements_expr="other.FreeSlots >= 4")).allowed


@pytest.mark.parametrize("level, queue_values, hard, host, code", [
    ("queue", {"slots": "4"}, {"slots": 2}, "wn1", Code.OK),
    ("queue", {"slots": "4"}, {}, "wn1", Code.OK),
    ("host", {}, {"arch": "lx-amd64"}, "", Code.OK),              # no pilot: the host is judged later
    ("queue", {}, {"arch": "lx-amd64"}, "", Code.OK),             # a host may offer it
    ("queue", {}, {"arch": "lx-amd64"}, "wn1", Code.NOT_NOW),     # this pilot's host does not: another may
])
def test_level_layers(level, queue_values, hard, host, code):
    layer = next(lv for lv in levels.LEVEL_LAYERS if lv.name == level)
    verdict = layer.check(context(request(host=host), queue_values=queue_values), task_queue(hard=hard))
    assert verdict.code is code, verdict


# ---------------------------------------------------------------- the queue and score phases
class Queued(Fake):
    """A layer with something to say about a queue alone."""

    def __init__(self, name, queue=ALLOW, **answers):
        super().__init__(name, **answers)
        self._queue, self.queued = queue, []

    def queue(self, ctx, tq):
        self.queued.append(ctx.request.host)
        return self._queue


class Scored(Fake):
    def __init__(self, name, score=0, **answers):
        super().__init__(name, **answers)
        self._score = score

    def score(self, ctx, tq):
        if isinstance(self._score, Exception):
            raise self._score
        return self._score


def test_the_queue_phase_asks_its_layers_without_the_pilot_and_never_the_request_phase():
    queued = Queued("r", queue=not_now("r", "not started"))
    layers = [Fake("a", check=not_now("a", "busy")), queued]
    decided = framework.evaluate(layers, context(), task_queue(), queue_only=True)
    assert (decided.verdict.layer, decided.verdict.reason) == ("r", "not started")
    every = framework.evaluate(layers, context(), task_queue(), queue_only=True, stop_at_first=False)
    assert every.verdict == decided.verdict and [v.code for _, v in every.layers] == [Code.OK, Code.NOT_NOW]
    assert queued.queued == ["", ""]
    # Without queue_only the request phase judges it (with the pilot), and the queue phase is not asked.
    framework.evaluate(layers, context(), task_queue())
    assert queued.queued == ["", ""]


def test_a_static_denial_outranks_the_queue_phase_which_is_then_not_asked():
    queued = Queued("r", queue=not_now("r", "not started"))
    decided = framework.evaluate([queued, Fake("b", static=never("b", "never here"))], context(), task_queue(),
                                 queue_only=True)
    assert (decided.verdict.layer, decided.verdict.code) == ("b", Code.NEVER) and queued.queued == []


@pytest.mark.parametrize("scores, score", [((), 0), ((0,), 0), ((2,), 2), ((1, 2), 3)])
def test_the_score_phase_sums_the_scores_of_an_allowed_task_queue(scores, score):
    layers = [Fake("a"), *(Scored(f"s{i}", s) for i, s in enumerate(scores))]
    for stop_at_first in (True, False):
        decided = framework.evaluate(layers, context(), task_queue(), stop_at_first=stop_at_first)
        assert decided.allowed and decided.score == score


def test_no_score_without_the_request_phase_nor_for_a_denied_task_queue():
    scored = Scored("s", 5)
    assert framework.evaluate([scored], context(), task_queue(), queue_only=True).score == 0
    assert framework.evaluate([scored], context(), task_queue(), static_only=True).score == 0
    denied = framework.evaluate([Fake("a", check=not_now("a", "busy")), scored], context(), task_queue())
    assert not denied.allowed and denied.score == 0


def test_a_layer_whose_score_raises_is_an_error_of_that_layer():
    verdict = framework.evaluate([Scored("s", ZeroDivisionError("x"))], context(), task_queue()).verdict
    assert verdict.code is Code.ERROR and verdict.layer == "s" and "ZeroDivisionError" in verdict.reason


def test_the_phases_of_the_layers_in_their_order():
    """The reservation layer alone judges a queue alone; the queue level alone scores (soft requests)."""
    queue_layers = [layer.name for layer in framework.LAYERS if isinstance(layer, QueueLayer)]
    score_layers = [layer.name for layer in framework.LAYERS if isinstance(layer, ScoreLayer)]
    assert (queue_layers, score_layers) == (["reservation"], ["queue"])


@pytest.mark.parametrize("soft, score", [({}, 0), ({"arch": "lx-amd64"}, 0), ({"arch": "lx-arm64"}, 1),
                                         ({"arch": "lx-arm64", "num_proc": 16}, 2)])
def test_the_queue_level_scores_the_soft_requests_the_pilot_misses(soft, score):
    tq = dataclasses.replace(task_queue(), soft=soft)
    ctx = context(request(load={"arch": "lx-amd64", "num_proc": 8}))
    assert framework.evaluate(framework.LAYERS, ctx, tq).score == score == levels.soft_violations(ctx, tq)


POOL_DOCS = {"P-rfc7": {"vo": "vo", "requirements": {"maxram": 4000}},
             "P-expr": {"vo": "vo", "expression": "other.MaxRAM >= 4000"},
             "P-fits": {"vo": "vo", "requirements": {"maxram": 1000}}}


@pytest.mark.parametrize("pool, rules, cause", [
    ("P-rfc7", None, None),                                 # no requirements known: no cause
    ("P-rfc7", POOL_DOCS, "MaxRAM: queue offers 2000, job needs 4000"),
    ("P-expr", POOL_DOCS, "Requirements expression is false for this queue"),
    ("P-fits", POOL_DOCS, None),                            # the rule admits the queue: the map is older
    ("P-gone", POOL_DOCS, None),
])
def test_the_pools_layer_gives_the_pools_own_cause_when_it_knows_the_requirements(pool, rules, cause):
    ctx = context(request(pools=("other",)))
    ctx.resources_for = lambda vo: SimpleNamespace(queue_parameter_map=lambda ref: ParameterMap(QUEUE_PARAMS),
                                                   queue_parameters=lambda ref: dict(QUEUE_PARAMS))
    if rules is not None:
        ctx.pool_rules = PoolRules(rules, {})
    verdict = framework.evaluate(framework.LAYERS, ctx, task_queue(pool=pool)).verdict
    denial = REASON_POOL.format(pool=pool)
    assert (verdict.layer, verdict.code, verdict.reason_code, verdict.reason) == (
        "pools", Code.NEVER, "not-in-submit-pool", f"{denial}: {cause}" if cause else denial)
    # A list of the job's queues (match-queues -v, submit's warning) gives the cause alone.
    assert listed_reason(verdict) == (cause or denial)


def test_a_batch_s_later_job_is_judged_with_the_slots_the_ones_before_it_left():
    # A pilot with 8 free slots; the jobs before took 6: the next is judged
    # as a request with 2 would be, by the host level and by an expression
    # on FreeSlots alike; the context it came from is left as it was.
    eight = context(request(slots=8))
    two = with_free_slots(eight, 2)
    four_slots = task_queue(hard={"slots": 4})
    assert framework.evaluate(framework.LAYERS, eight, four_slots).verdict.allowed
    assert not framework.evaluate(framework.LAYERS, two, four_slots).verdict.allowed
    wants_room = task_queue(requirements_expr="other.FreeSlots >= 4")
    assert framework.evaluate(framework.LAYERS, eight, wants_room).verdict.allowed
    assert framework.evaluate(framework.LAYERS, two, wants_room).verdict.code is Code.NOT_NOW
    assert (two.request.slots, two.pilot_ad["FreeSlots"]) == (2, 2)
    assert (eight.request.slots, eight.pilot_ad["FreeSlots"]) == (8, 8)
