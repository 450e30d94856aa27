"""The evaluation budget: what one job's expression may cost the service.

A job's ClassAd Requirements expression is evaluated by the service, in
native code that holds the interpreter: at submission against every queue's
parameters (the SubmitPool, specs/002), at each pilot request that draws its
task queue against the queue and the pilot (specs/004). What it costs there
is chosen by the user who wrote it; ``limits.evaluation_ms`` bounds it, per
evaluation against one queue (docs/security.md, "Evaluation cost").

The cost is CPU time of the evaluating thread (``time.thread_time``), not
wall-clock time: a busy machine that takes the processor away from the
thread does not count against the job. What noise remains (caches, a
neighbour's memory traffic) is met by measuring again once before refusing
(:func:`judged`), unless the first measurement is so far over that no noise
explains it.

Submission compares the *total* over the queues with the budget times the
number of queues, and stops evaluating as soon as the total is past it: a
slow expression costs at most about its budget before it is refused, plus
the one evaluation under way (native code cannot be interrupted; the
pattern check of :mod:`wms.core.regexps` keeps that one bounded).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

from wms.core.errors import InvalidInput

__all__ = ["OverBudget", "clock", "judged", "over_budget_message", "within_budget"]

T = TypeVar("T")
R = TypeVar("R")

#: A first measurement this many times over the limit is refused without a
#: second: no noise of a busy machine makes a CPU-time measurement that wrong.
CERTAIN = 10.0

clock: Callable[[], float] = time.thread_time


class OverBudget(InvalidInput):
    """An expression over ``limits.evaluation_ms``; ``seconds`` is its cost
    against one queue, ``limit`` the budget, both in seconds."""

    def __init__(self, message: str, *, seconds: float, limit: float, where: str | None = None) -> None:
        super().__init__(message, where=where)
        self.seconds = seconds
        self.limit = limit


def _ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.1g} ms" if ms < 0.1 else f"{ms:.1f} ms"


def over_budget_message(what: str, seconds: float, limit: float) -> str:
    """``Requirements take 480 ms to evaluate against one queue; the limit is 5 ms``."""
    return (f"{what} take {_ms(seconds)} to evaluate against one queue; the limit is {_ms(limit)} "
            "(limits.evaluation_ms)")


@dataclass(frozen=True)
class _Pass:
    results: list | None          # None: stopped past the allowance
    per_item: float               # seconds per item evaluated


def _one_pass(items: Sequence[T], evaluate: Callable[[T], R], limit: float) -> _Pass:
    allowance = limit * len(items)
    spent = 0.0
    results: list[R] = []
    for n, item in enumerate(items, 1):
        start = clock()
        try:
            results.append(evaluate(item))
        finally:
            spent += clock() - start
        if spent > allowance:
            return _Pass(None, spent / n)
    return _Pass(results, spent / len(items) if items else 0.0)


def within_budget(items: Sequence[T], evaluate: Callable[[T], R], limit: float, what: str) -> list[R]:
    """``evaluate(item)`` for every item, the total held to ``limit`` seconds an
    item; raises :class:`OverBudget` (with the cost of one) when it is past it
    twice, or once by :data:`CERTAIN` times. Exceptions of ``evaluate`` go through."""
    first = _one_pass(items, evaluate, limit)
    if first.results is not None:
        return first.results
    if first.per_item <= CERTAIN * limit:
        second = _one_pass(items, evaluate, limit)
        if second.results is not None:
            return second.results
        cost = min(first.per_item, second.per_item)
    else:
        cost = first.per_item
    raise OverBudget(over_budget_message(what, cost, limit), seconds=cost, limit=limit)


def judged(evaluate: Callable[[], R], limit: float) -> tuple[R, float | None]:
    """``evaluate()`` and, when it took more than ``limit`` seconds twice (or
    once by :data:`CERTAIN` times), what it took (the smaller figure); else None.
    Costs two clock reads when the evaluation is within the limit."""
    start = clock()
    result = evaluate()
    spent = clock() - start
    if spent <= limit:
        return result, None
    if spent <= CERTAIN * limit:
        start = clock()
        result = evaluate()
        spent = min(spent, clock() - start)
        if spent <= limit:
            return result, None
    return result, spent
