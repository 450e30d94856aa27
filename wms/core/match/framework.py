"""Where a job may run: the one place that decides it.

The layers, in their one order (DESIGN.md; specs/003 puts advance
reservations first, specs/001 quotas above the levels, specs/000 the
levels strictly global -> host -> queue):

    pools, reservation, quota, global, host, queue, requirements

A task queue is judged in two phases, each in that order:

1. the static phase: what configuration alone decides (``Layer.static``),
   the same for every pilot of a queue, cached per task queue, queue and
   pools; a denial here is NEVER;
2. the request phase: what this pilot, this usage and this time decide
   (``Layer.check``).

The first denial decides. A denial of the static phase outranks any of
the request phase: "this queue can never run it" says more than "not
now", and costs nothing once cached. The Matcher (a pilot's request),
``wms why`` (a queue without a pilot, every layer reported) and the
SiteDirector (static phase only: where pilots are worth sending) all call
``evaluate``, so they cannot disagree on which layer keeps a job away.

A layer that raises is an ERROR verdict of that layer, never an answer for
the whole request.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Sequence

from wms.core.match.context import MatchContext, TaskQueueView
from wms.core.match.layer import Debit, Layer
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
    was asked for, each layer's own verdict in layer order."""

    verdict: Verdict
    layers: tuple[tuple[str, Verdict], ...] = ()

    @property
    def allowed(self) -> bool:
        return self.verdict.allowed

    def denials(self) -> list[Verdict]:
        """Every layer's denial, in layer order (empty unless every layer was asked)."""
        return [v for _, v in self.layers if not v.allowed]


def _ask(layer: Layer, phase: str, ctx: MatchContext, tq: TaskQueueView) -> Verdict:
    try:
        verdict = layer.static(ctx, tq) if phase == "static" else layer.check(ctx, tq)
    except Exception as exc:   # a defect of one layer must not decide for the request
        return Verdict(Code.ERROR, layer.name, REASON_LAYER_FAILED,
                       {"layer": layer.name, "error": f"{type(exc).__name__}: {exc}"})
    if not verdict.allowed and not verdict.layer:
        return Verdict(verdict.code, layer.name, verdict.why, verdict.detail)
    return verdict


def static_verdict(layers: Sequence[Layer], ctx: MatchContext, tq: TaskQueueView) -> Verdict:
    """The first denial of the static phase, or OK: judged without the pilot,
    so that it holds for every pilot of the queue and may be cached."""
    ctx = ctx.without_the_pilot()
    for layer in layers:
        verdict = _ask(layer, "static", ctx, tq)
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
    static_only: bool = False, cache: StaticVerdicts | None = None,
) -> Diagnosis:
    """Judge ``tq`` on ``ctx``: the static phase (from ``cache`` when given), then the request phase.

    With ``stop_at_first`` (the Matcher) the first denial ends it; without
    (``wms why``), every layer is asked and its verdict recorded: its static
    denial if it has one, else its request-phase verdict.
    """
    if stop_at_first:
        verdict = cache.get(layers, ctx, tq) if cache is not None else static_verdict(layers, ctx, tq)
        if not verdict.allowed or static_only:
            return Diagnosis(verdict)
        for layer in layers:
            verdict = _ask(layer, "check", ctx, tq)
            if not verdict.allowed:
                return Diagnosis(verdict)
        return Diagnosis(ALLOW)
    per_layer: list[tuple[str, Verdict]] = []
    first_static: Verdict | None = None
    first_request: Verdict | None = None
    queue_only = ctx.without_the_pilot()
    for layer in layers:
        verdict = _ask(layer, "static", queue_only, tq)
        if not verdict.allowed:
            first_static = first_static or verdict
        elif not static_only:
            verdict = _ask(layer, "check", ctx, tq)
            if not verdict.allowed:
                first_request = first_request or verdict
        per_layer.append((layer.name, verdict))
    return Diagnosis(first_static or first_request or ALLOW, tuple(per_layer))


def debits(layers: Sequence[Layer], ctx: MatchContext, tq: TaskQueueView) -> list[Debit]:
    """Every debit of a claim: each layer's, then each layer's adjustment, in
    key order so that concurrent claimers lock usage rows in one order."""
    out: list[Debit] = []
    for layer in layers:
        out.extend(layer.debits(ctx, tq))
    for layer in layers:
        out = layer.adjust(ctx, tq, out)
    return sorted(out, key=lambda d: (d.scope, d.resource))
