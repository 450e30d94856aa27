"""Fair shares between groups (DIRAC's TaskQueue priorities, operations.yaml Shares).

A group's share is split among its task queues in proportion to their
waiting jobs, so that the Matcher's draw, proportional to priority
(match/choice.py), gives each group its share of the pilots whatever the
number of task queues it has: a group with twice the share gets twice the
matches, not twice the matches per task queue. Every priority is at least
1, so no task queue starves.
"""

from __future__ import annotations

from typing import Iterable, Mapping

# Priorities are integers; the scale keeps the split exact enough when a
# share is small and a group has many task queues.
SCALE = 1000
DEFAULT_SHARE = 1


def task_queue_priorities(waiting: Iterable[tuple[int, str, int]], shares: Mapping[str, int]) -> dict[int, int]:
    """{tq_id: priority} from (tq_id, group, waiting jobs) rows and the group shares."""
    rows = list(waiting)
    per_group: dict[str, int] = {}
    for _, group, count in rows:
        per_group[group] = per_group.get(group, 0) + count
    out = {}
    for tq_id, group, count in rows:
        share = shares.get(group, DEFAULT_SHARE)
        out[tq_id] = max(1, round(SCALE * share * count / per_group[group])) if per_group[group] else 1
    return out
