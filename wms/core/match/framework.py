"""Where a job may run: the one place that decides it.

The layers, in their one order (DESIGN.md; specs/003 puts advance
reservations first, specs/001 quotas above the levels, specs/000 the
levels strictly global -> host -> queue):

    pools, reservation, quota, global, host, queue, requirements

A task queue is judged in phases, each in that order:

1. the static phase: what configuration alone decides (``Layer.static``),
   the same for every pilot of a queue, cached per task queue, queue and
   pools; a denial here is NEVER;
2. the queue phase: what the queue alone decides now, without a pilot and
   without usage (``QueueLayer.queue``: an advance reservation that is
   not running or holds nothing there). It is the last phase of a
   queue-only judgement (``queue_only``: the SiteDirector's demand, `wms
   match-queues`); the request phase judges the same with the pilot
   (``check`` denies whatever ``queue`` denies), so it is not asked twice;
3. the request phase: what this pilot, this usage and this time decide
   (``Layer.check``);
4. the score phase, for a task queue the request phase allowed: how far
   it misses its preferences here (``ScoreLayer.score``, soft requests),
   0 for not at all. The Matcher takes a task queue with a score only
   when none without is left, the lowest first.

The first denial decides. A denial of the static phase outranks any later
one: "this queue can never run it" says more than "not now", and costs
nothing once cached. The Matcher (a pilot's request), ``wms why`` (a
queue without a pilot, every layer reported), the SiteDirector and `wms
match-queues` (the queue phase: where pilots are worth sending) and `wms
submit`'s warning (the static phase: what no pilot would ever run) all
call ``evaluate``, so they cannot disagree on which layer keeps a job
away, nor on why: a layer's reason, the SubmitPool's own cause included,
is in its verdict.

A layer that raises is an ERROR verdict of that layer, never an answer for
the whole request.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from dataclasses import dataclass
from typing import Callable, Sequence

from wms.core.match.context import MatchContext, TaskQueueView
from wms.core.match.layer import Debit, Layer, QueueLayer, ScoreLayer
from wms.core.match.levels import LEVEL_LAYERS
from wms.core.match.pools import PoolsLayer
from wms.core.match.quotas import QUOTA_LAYER
from wms.core.match.requirements import RequirementsLayer
from wms.core.match.reservations import ReservationLayer
from wms.core.match.verdict import ALLOW, Code, Verdict
from wms.core.reasons import Reason

REASON_LAYER_FAILED = Reason("layer-failed", "{layer} layer failed: {error}")

LAYERS: tuple[Layer, ...] = (PoolsLayer(), ReservationLayer(), QUOTA_LAYER, *LEVEL_LAYERS, RequirementsLayer())


@dataclass(frozen=True)
class Diagnosis:
    """The deciding verdict (the first denial, or OK) and, when every layer
    was asked for, each layer's own verdict in layer order. ``score`` is
    the score phase's sum for a task queue the request phase allowed (0
    otherwise, and when the judgement stopped before that phase)."""

    verdict: Verdict
    layers: tuple[tuple[str, Verdict], ...] = ()
    score: int = 0

    @property
    def allowed(self) -> bool:
        return self.verdict.allowed

    def denials(self) -> list[Verdict]:
        """Every layer's denial, in layer order (empty unless every layer was asked)."""
        return [v for _, v in self.layers if not v.allowed]


_ALLOWED = Diagnosis(ALLOW)


@dataclass(frozen=True)
class _ExtensionPoints:
    """The layers that take part in the optional phases, in layer order."""

    queue: tuple[QueueLayer, ...]
    score: tuple[ScoreLayer, ...]


@functools.lru_cache(maxsize=32)
def _extension_points(layers: tuple[Layer, ...]) -> _ExtensionPoints:
    # Worked out once per sequence of layers (the k8s framework asserts its
    # plugins' extension points up front): a phase asks only its layers.
    return _ExtensionPoints(tuple(layer for layer in layers if isinstance(layer, QueueLayer)),
                            tuple(layer for layer in layers if isinstance(layer, ScoreLayer)))


def _failed(name: str, exc: Exception) -> Verdict:
    return Verdict(Code.ERROR, name, REASON_LAYER_FAILED, {"layer": name, "error": f"{type(exc).__name__}: {exc}"})


def _named(verdict: Verdict, name: str) -> Verdict:
    """The framework, not the layer, records which layer denied."""
    if not verdict.allowed and not verdict.layer:
        return Verdict(verdict.code, name, verdict.why, verdict.detail)
    return verdict


def _ask(name: str, question: Callable[[MatchContext, TaskQueueView], Verdict], ctx: MatchContext,
         tq: TaskQueueView) -> Verdict:
    """One layer's answer to one phase's question."""
    try:
        verdict = question(ctx, tq)
    except Exception as exc:   # a defect of one layer must not decide for the request
        return _failed(name, exc)
    return _named(verdict, name)


def static_verdict(layers: Sequence[Layer], ctx: MatchContext, tq: TaskQueueView) -> Verdict:
    """The first denial of the static phase, or OK: judged without the pilot,
    so that it holds for every pilot of the queue and may be cached."""
    ctx = ctx.without_the_pilot()
    for layer in layers:
        verdict = _ask(layer.name, layer.static, ctx, tq)
        if not verdict.allowed:
            return verdict
    return ALLOW


class StaticVerdicts:
    """The static phase's verdicts per (task queue, queue, pools), kept for
    the life of one configuration (whoever changes it makes a new one).

    Two threads computing the same key at once both compute the same
    verdict; the lock only keeps the dictionary's writes whole.
    """

    def __init__(self) -> None:
        self._verdicts: dict[tuple[int, str, tuple[str, ...] | None], Verdict] = {}
        self._lock = threading.Lock()

    def get(self, layers: Sequence[Layer], ctx: MatchContext, tq: TaskQueueView) -> Verdict:
        key = (tq.tq_id, ctx.request.ref.name, ctx.request.pools)
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = static_verdict(layers, ctx, tq)
            if verdict.code is not Code.ERROR:      # a failure is not a fact about the configuration
                with self._lock:
                    self._verdicts[key] = verdict
        return verdict

    def __len__(self) -> int:
        return len(self._verdicts)


def evaluate(
    layers: Sequence[Layer], ctx: MatchContext, tq: TaskQueueView, *, stop_at_first: bool = True,
    static_only: bool = False, queue_only: bool = False, cache: StaticVerdicts | None = None,
) -> Diagnosis:
    """Judge ``tq`` on ``ctx``: the static phase (from ``cache`` when given),
    then the queue phase (``queue_only``) or the request and score phases.
    ``static_only`` stops after the static phase.

    With ``stop_at_first`` (the Matcher) the first denial ends it; without
    (``wms why``), every layer is asked and its verdict recorded: its static
    denial if it has one, else its verdict of the next phase.
    """
    if stop_at_first:
        verdict = cache.get(layers, ctx, tq) if cache is not None else static_verdict(layers, ctx, tq)
        if not verdict.allowed or static_only:
            return Diagnosis(verdict)
        if queue_only:
            queue_ctx = ctx.without_the_pilot()
            for queue_layer in _extension_points(tuple(layers)).queue:
                verdict = _ask(queue_layer.name, queue_layer.queue, queue_ctx, tq)
                if not verdict.allowed:
                    return Diagnosis(verdict)
            return _ALLOWED
        # The Matcher's loop, asked of every task queue it draws: _ask written
        # out, so that no bound method nor call is made per layer.
        for layer in layers:
            try:
                verdict = layer.check(ctx, tq)
            except Exception as exc:   # a defect of one layer must not decide for the request
                return Diagnosis(_failed(layer.name, exc))
            if not verdict.allowed:
                return Diagnosis(_named(verdict, layer.name))
        return _scored(layers, ctx, tq)
    per_layer: list[tuple[str, Verdict]] = []
    first_static: Verdict | None = None
    first_later: Verdict | None = None
    queue_ctx = ctx.without_the_pilot()
    for layer in layers:
        verdict = _ask(layer.name, layer.static, queue_ctx, tq)
        if not verdict.allowed:
            first_static = first_static or verdict
        elif not static_only:
            if not queue_only:
                verdict = _ask(layer.name, layer.check, ctx, tq)
            elif isinstance(layer, QueueLayer):
                verdict = _ask(layer.name, layer.queue, queue_ctx, tq)
            if not verdict.allowed:
                first_later = first_later or verdict
        per_layer.append((layer.name, verdict))
    decided = first_static or first_later
    if decided is not None:
        return Diagnosis(decided, tuple(per_layer))
    if static_only or queue_only:
        return Diagnosis(ALLOW, tuple(per_layer))
    return dataclasses.replace(_scored(layers, ctx, tq), layers=tuple(per_layer))


def _scored(layers: Sequence[Layer], ctx: MatchContext, tq: TaskQueueView) -> Diagnosis:
    """The score phase, for a task queue the request phase allowed: the sum
    of the layers' scores, or the ERROR of a layer that raised (as ``_ask``
    makes it: for this task queue only)."""
    total = 0
    for layer in _extension_points(tuple(layers)).score:
        try:
            total += layer.score(ctx, tq)
        except Exception as exc:   # a defect of one layer must not decide for the request
            return Diagnosis(_failed(layer.name, exc))
    return Diagnosis(ALLOW, score=total) if total else _ALLOWED


def debits(layers: Sequence[Layer], ctx: MatchContext, tq: TaskQueueView) -> list[Debit]:
    """Every debit of a claim: each layer's, then each layer's adjustment, in
    key order so that concurrent claimers lock usage rows in one order."""
    out: list[Debit] = []
    for layer in layers:
        out.extend(layer.debits(ctx, tq))
    for layer in layers:
        out = layer.adjust(ctx, tq, out)
    return sorted(out, key=lambda d: (d.scope, d.resource))
