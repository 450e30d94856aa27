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

Soft requests (SoftResourceRequests): the Matcher tries the task queues
without soft violations on the pilot first, in the drawn order, then the
others by increasing violations (services/matcher.py).
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

