"""What a layer of the match framework is (framework.py runs them).

A layer enforces one policy (SubmitPools, advance reservations, resource
quotas, one Grid Engine level, the job's own requirements) and answers
four questions about a task queue on a context:

* ``static``: what the configuration alone decides, without a pilot and
  without usage. Only NEVER (or OK) comes out of it, so the framework
  caches it per task queue, queue and pools (specs/000 "Result caching").
* ``check``: what this request decides (the pilot, the usage read, the
  time). It may repeat the static part: the framework asks it only when
  every layer's static part allowed the task queue.
* ``debits``: what a job of the task queue takes from the usage rows this
  layer guards, for the claim's conditional debits.
* ``adjust``: a change this layer makes to every layer's debits (advance
  reservations lower capacities or move a reservation's jobs to its own
  rows); most layers leave them as they are.

Two more questions are extension points: only a layer that has something
to say answers them, and the framework asks only those layers.

* ``queue`` (:class:`QueueLayer`): what the queue alone decides now,
  without a pilot and without usage (an advance reservation that is not
  running, or that holds nothing in the queue): the queue phase, asked
  when no pilot will be (the SiteDirector, ``wms match-queues``).
  ``check`` must deny whatever ``queue`` denies, for every pilot: the
  request phase judges the same thing with the pilot.
* ``score`` (:class:`ScoreLayer`): how far a task queue every phase
  allowed misses its preferences on this request (soft requests), 0 for
  not at all; the lower the better.

A layer never imports another: anything two layers share is a step of the
framework or lives in this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

from wms.core.match.context import MatchContext, TaskQueueView
from wms.core.match.verdict import ALLOW, Verdict


@dataclass(frozen=True)
class Debit:
    """An amount taken from one usage row (scope, resource), within ``capacity``.

    ``level`` names the layer's part that charges it (global, host, queue,
    quota) for the reason given when it does not fit.
    """

    level: str
    scope: str
    resource: str
    amount: float
    capacity: float


class Layer(Protocol):
    name: str

    def static(self, ctx: MatchContext, tq: TaskQueueView) -> Verdict: ...

    def check(self, ctx: MatchContext, tq: TaskQueueView) -> Verdict: ...

    def debits(self, ctx: MatchContext, tq: TaskQueueView) -> list[Debit]: ...

    def adjust(self, ctx: MatchContext, tq: TaskQueueView, debits: Sequence[Debit]) -> list[Debit]: ...


@runtime_checkable
class QueueLayer(Protocol):
    """A layer with something to say about a queue alone (the queue phase)."""

    name: str

    def queue(self, ctx: MatchContext, tq: TaskQueueView) -> Verdict: ...


@runtime_checkable
class ScoreLayer(Protocol):
    """A layer that scores the task queues every phase allowed (the score phase)."""

    name: str

    def score(self, ctx: MatchContext, tq: TaskQueueView) -> int: ...


class BaseLayer:
    """The answers of a layer that has nothing to say: allowed, no debits, none changed."""

    name = ""

    def static(self, ctx: MatchContext, tq: TaskQueueView) -> Verdict:
        return ALLOW

    def check(self, ctx: MatchContext, tq: TaskQueueView) -> Verdict:
        return ALLOW

    def debits(self, ctx: MatchContext, tq: TaskQueueView) -> list[Debit]:
        return []

    def adjust(self, ctx: MatchContext, tq: TaskQueueView, debits: Sequence[Debit]) -> list[Debit]:
        return list(debits)
