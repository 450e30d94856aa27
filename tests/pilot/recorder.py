"""A Reporter that records the runner's calls (no server involved)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from pilot.runner import Reporter


class Recorder:
    """Collects status/heartbeat/output calls; behaviour tweakable per test."""

    def __init__(
        self,
        *,
        kill_after: int | None = None,
        on_status: Callable[[str], None] | None = None,
        on_heartbeat: Callable[[int], None] | None = None,
        on_output: Callable[[], None] | None = None,
    ) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.statuses: list[tuple[str, str, int | None]] = []
        self.outputs: list[tuple[str, str, bool]] = []
        self.heartbeats = 0
        self.ended_ago: list[float | None] = []      # what each status call said of the payload's end
        self.kill_after = kill_after
        self.on_status = on_status
        self.on_heartbeat = on_heartbeat
        self.on_output = on_output
        self.running = threading.Event()
        self.t0 = time.monotonic()

    def status(self, job_id: int, status: str, minor: str, exit_code: int | None,
               ended_ago: float | None = None, output: tuple[str, str, bool] | None = None) -> None:
        if output is not None:              # one call: the output first, as the server stores it
            self.output(job_id, *output)
        self.calls.append(("status", job_id, status, minor, exit_code))
        self.ended_ago.append(ended_ago)
        if self.on_status:
            self.on_status(status)
        self.statuses.append((status, minor, exit_code))
        if status == "Running":
            self.running.set()

    def heartbeat(self, job_id: int) -> bool:
        self.calls.append(("heartbeat", job_id))
        self.heartbeats += 1
        if self.on_heartbeat:
            self.on_heartbeat(self.heartbeats)
        return self.kill_after is not None and self.heartbeats >= self.kill_after

    def output(self, job_id: int, stdout: str, stderr: str, truncated: bool) -> None:
        self.calls.append(("output", job_id))
        if self.on_output:
            self.on_output()
        self.outputs.append((stdout, stderr, truncated))

    def reporter(self) -> Reporter:
        return Reporter(status=self.status, heartbeat=self.heartbeat)

    @property
    def kinds(self) -> list[str]:
        return [c[0] if c[0] != "status" else c[2] for c in self.calls]
