"""Where a short job's time goes: the stages of its life, from the times the
system records (`wms bench e2e`, docs/benchmarks.md).

Each boundary is a time the server stored for the job, never one the bench
took: submitted (the job's submission time, when the server received it),
Waiting (the history entry written when the optimizer chain filed it),
Matched (the claim's time), Running (the pilot's Running report, after which
the payload starts), payload end (the pilot's clock, sent with its final
report) and Done (the history entry of that report, sent once the output is
stored). Pure: the rows come from wms/bench/e2e.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from wms.bench.over_http import percentile

# (name, from, to): the boundaries are fields of JobTimes.
STAGES = (
    ("submitted -> Waiting", "submitted", "waiting"),
    ("Waiting -> Matched", "waiting", "matched"),
    ("Matched -> Running", "matched", "running"),
    ("Running -> payload end", "running", "ended"),
    ("payload end -> Done", "ended", "done"),
)


@dataclass(frozen=True)
class JobTimes:
    job_id: int
    status: str
    submitted: datetime | None
    waiting: datetime | None
    matched: datetime | None
    running: datetime | None
    ended: datetime | None
    done: datetime | None


def stage_figures(times: list[JobTimes]) -> list[dict[str, Any]]:
    """Per stage: median, p99 and longest in ms over the jobs that recorded both
    of its boundaries, and how many did not (``missing``)."""
    figures = []
    for name, start, end in STAGES:
        spans = sorted((getattr(t, end) - getattr(t, start)).total_seconds() for t in times
                       if getattr(t, start) is not None and getattr(t, end) is not None)
        figures.append({"stage": name, "median_ms": _ms(percentile(spans, 0.5)), "p99_ms": _ms(percentile(spans, 0.99)),
                        "max_ms": _ms(1000 * spans[-1] if spans else None), "jobs": len(spans),
                        "missing": len(times) - len(spans)})
    return figures


def _ms(value: float | None) -> float | None:
    return round(value, 1) if value is not None else None


def throughput(times: list[JobTimes], started: datetime) -> dict[str, Any]:
    """Jobs per second from ``started`` (just before the submission) to the last
    Done, and when the first job was matched (the pilots' start)."""
    done = [t.done for t in times if t.status == "Done" and t.done is not None]
    matched = [t.matched for t in times if t.matched is not None]
    seconds = (max(done) - started).total_seconds() if done else None
    return {
        "done": len(done),
        "seconds": round(seconds, 3) if seconds is not None else None,
        "jobs_per_second": round(len(done) / seconds, 2) if seconds else None,
        "first_matched_after": round((min(matched) - started).total_seconds(), 3) if matched else None,
    }
