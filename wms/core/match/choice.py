"""Which eligible task queue a pilot gets (DESIGN.md; DIRAC's Matcher).

Task queues are drawn at random in proportion to their priority: a task
queue of priority p among queues summing to P is chosen with probability
exactly p/P. DIRAC sorts by ``RAND()/priority``, which is not proportional
(the minimum of scaled uniforms favours high priorities more than their
weight); we use Efraimidis-Spirakis keys ``u ** (1/p)``, whose descending
order is a weighted sample without replacement: the first element has
exactly the proportional law, and the rest are the fallbacks in the right
order if the first has no job left. Every priority is at least 1, so no
task queue can be starved forever: each draw gives it a positive chance.

Soft requests (SoftResourceRequests) come first: only the task queues with
the fewest soft violations on this pilot are drawn before the others.
"""

from __future__ import annotations

import random
from typing import Sequence, TypeVar

T = TypeVar("T")


def weighted_order(items: Sequence[T], weights: Sequence[float], rng: random.Random) -> list[T]:
    """``items`` in a random order where each comes first with probability weight/total."""
    keyed = []
    for item, weight in zip(items, weights):
        weight = max(float(weight), 1.0)
        keyed.append((rng.random() ** (1.0 / weight), item))
    keyed.sort(key=lambda pair: pair[0], reverse=True)
    return [item for _, item in keyed]


def claim_order(
    candidates: Sequence[T], weights: Sequence[float], violations: Sequence[int], rng: random.Random
) -> list[T]:
    """The order in which to try candidates: fewest soft violations first, weighted random within."""
    by_violations: dict[int, list[int]] = {}
    for index, count in enumerate(violations):
        by_violations.setdefault(count, []).append(index)
    ordered: list[T] = []
    for count in sorted(by_violations):
        indexes = by_violations[count]
        ordered.extend(weighted_order([candidates[i] for i in indexes], [weights[i] for i in indexes], rng))
    return ordered
