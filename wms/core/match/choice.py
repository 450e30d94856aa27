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

import bisect
import itertools
import random
from typing import Generic, Iterator, Sequence, TypeVar

T = TypeVar("T")


def weighted_order(items: Sequence[T], weights: Sequence[float], rng: random.Random) -> list[T]:
    """``items`` in a random order where each comes first with probability weight/total."""
    keyed = []
    for item, weight in zip(items, weights):
        weight = max(float(weight), 1.0)
        keyed.append((rng.random() ** (1.0 / weight), item))
    keyed.sort(key=lambda pair: pair[0], reverse=True)
    return [item for _, item in keyed]



class WeightedDraw(Generic[T]):
    """Lazy weighted sampling without replacement over a fixed list.

    Built once per list of candidates (cumulative weights), then each
    request draws in O(log n) per item it actually needs: most requests
    claim from the first or second task queue drawn, so ordering all of a
    thousand candidates would be wasted work. Draws are exact: an item
    already drawn is redrawn (rejection), which leaves the others in
    proportion; once most of the weight is used up, the rest is ordered
    with ``weighted_order``.
    """

    def __init__(self, items: Sequence[T], weights: Sequence[float]) -> None:
        self.items = list(items)
        self.weights = [max(float(w), 1.0) for w in weights]
        self.cumulative = list(itertools.accumulate(self.weights))
        self.total = self.cumulative[-1] if self.cumulative else 0.0

    def order(self, rng: random.Random) -> Iterator[T]:
        drawn: set[int] = set()
        used = 0.0
        while len(drawn) < len(self.items):
            if used > self.total / 2:
                rest = [i for i in range(len(self.items)) if i not in drawn]
                for i in weighted_order(rest, [self.weights[i] for i in rest], rng):
                    yield self.items[i]
                return
            i = bisect.bisect_right(self.cumulative, rng.random() * self.total)
            i = min(i, len(self.items) - 1)
            if i in drawn:
                continue
            drawn.add(i)
            used += self.weights[i]
            yield self.items[i]
