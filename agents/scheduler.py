"""The in-process scheduler of `wms up` and `wms agents`: each agent runs on
its period (wms.yaml ``agent_periods``) on one thread, so the embedded
default needs no broker. A failing run is logged and retried next period;
it never stops the others."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone
from typing import Callable, Mapping

from agents.registry import AGENTS, Agent
from agents.reports import log_run
from wms.services.runtime import Runtime

log = logging.getLogger("wms.agents")


class Scheduler(threading.Thread):
    def __init__(
        self,
        runtime: Runtime,
        agents: Mapping[str, Agent] | None = None,
        periods: Mapping[str, float] | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        super().__init__(name="wms-agents", daemon=True)
        self.runtime = runtime
        self.agents = dict(agents if agents is not None else AGENTS)
        self.periods = {name: float(periods[name]) if periods and name in periods
                        else float(runtime.config.settings.agent_period(name)) for name in self.agents}
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self.stop_event = threading.Event()
        self.runs: dict[str, int] = dict.fromkeys(self.agents, 0)
        self.last_report: dict[str, object] = {}

    def run_once(self, name: str) -> object:
        """Run one agent now; its report, or None when it failed (logged)."""
        started = time.monotonic()
        try:
            report = self.agents[name](self.runtime, self.clock())
        except Exception:  # noqa: BLE001 - one failing agent must not stop the others
            log.exception("agent %s failed", name)
            return None
        finally:
            self.runs[name] += 1
        log_run(name, report, time.monotonic() - started)
        self.last_report[name] = report
        return report

    def run(self) -> None:
        # Every agent runs once at start (as DIRAC's agents do), then on its period.
        due = dict.fromkeys(self.periods, time.monotonic())
        while not self.stop_event.is_set():
            now = time.monotonic()
            for name in sorted(due, key=due.get):
                if due[name] <= now:
                    self.run_once(name)
                    due[name] = time.monotonic() + self.periods[name]
            wait = max(0.0, min(due.values()) - time.monotonic()) if due else 1.0
            self.stop_event.wait(wait)

    def stop(self) -> None:
        self.stop_event.set()
