"""Task-queue choice: proportional to priority, no starvation."""

from __future__ import annotations

import random
from collections import Counter

from wms.core.match.choice import weighted_order


def test_first_choice_is_proportional_to_priority():
    rng = random.Random(7)
    draws = 60_000
    firsts = Counter(weighted_order(["a", "b", "c"], [1, 3, 6], rng)[0] for _ in range(draws))
    for item, weight in (("a", 1), ("b", 3), ("c", 6)):
        assert abs(firsts[item] / draws - weight / 10) < 0.01


def test_a_low_priority_queue_is_not_starved():
    rng = random.Random(1)
    firsts = Counter(weighted_order(["low", "high"], [1, 1000], rng)[0] for _ in range(20_000))
    assert 5 <= firsts["low"] <= 45   # expected about 20


def test_every_candidate_appears_once():
    rng = random.Random(3)
    order = weighted_order(list(range(50)), [i + 1 for i in range(50)], rng)
    assert sorted(order) == list(range(50))



def test_lazy_draw_is_proportional_and_complete():
    from wms.core.match.choice import WeightedDraw

    rng = random.Random(11)
    draw = WeightedDraw(["a", "b", "c"], [1, 3, 6])
    draws = 60_000
    firsts = Counter(next(draw.order(rng)) for _ in range(draws))
    for item, weight in (("a", 1), ("b", 3), ("c", 6)):
        assert abs(firsts[item] / draws - weight / 10) < 0.01
    # The second is proportional among the rest: P(a second) = .3 * 1/7 + .6 * 1/4.
    seconds = Counter(list(draw.order(rng))[1] for _ in range(draws))
    assert abs(seconds["a"] / draws - (0.3 / 7 + 0.6 / 4)) < 0.01
    assert sorted(draw.order(rng)) == ["a", "b", "c"]
    big = WeightedDraw(list(range(300)), [1 + i % 7 for i in range(300)])
    assert sorted(big.order(rng)) == list(range(300))
