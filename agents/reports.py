"""The one log line of each agent run, the same from the in-process
scheduler (`wms up`, `wms agents`) and from a Celery worker."""

from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger("wms.agents")

# A report can list many queues or jobs; the line keeps its start, the
# JSON log its whole.
SHOWN_REPORT_CHARS = 300


def shown_report(report: Any) -> str:
    """A report on one line, cut at SHOWN_REPORT_CHARS."""
    text = json.dumps(report, default=str, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= SHOWN_REPORT_CHARS else text[:SHOWN_REPORT_CHARS - 3] + "..."


def log_run(name: str, report: Any, seconds: float) -> None:
    """``agent NAME ran in S s: REPORT`` at INFO."""
    log.info("agent %s ran in %.2f s: %s", name, seconds, shown_report(report),
             extra={"fields": {"agent": name, "duration_s": round(seconds, 3), "report": report}})
