"""Log lines on stderr with time, pilot id and job id.

Slot workers run in threads, one job each, so the job id lives in a
thread-local set by :func:`job_context`; a filter stamps it (and the pilot
id) onto every record of the ``pilot`` logger tree. Only that tree is
configured, never the root logger, so calling ``main()`` inside another
program (or a test) does not change that program's logging.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

FORMAT = "%(asctime)s %(levelname)-7s pilot=%(pilot_id)s job=%(job_id)s %(message)s"

_local = threading.local()


@contextmanager
def job_context(job_id: int | str | None) -> Iterator[None]:
    """Tag this thread's log lines with ``job_id`` while inside the block."""
    previous = getattr(_local, "job_id", None)
    _local.job_id = job_id
    try:
        yield
    finally:
        _local.job_id = previous


class ContextFilter(logging.Filter):
    """Adds ``pilot_id`` and ``job_id`` (``-`` when none) to each record."""

    def __init__(self, pilot_id: str) -> None:
        super().__init__()
        self.pilot_id = pilot_id

    def filter(self, record: logging.LogRecord) -> bool:
        record.pilot_id = self.pilot_id
        job_id = getattr(_local, "job_id", None)
        record.job_id = "-" if job_id is None else job_id
        return True


def setup(pilot_id: str, level: str | int = "INFO", stream: TextIO | None = None) -> logging.Logger:
    """Configure the ``pilot`` logger (idempotent: replaces its own handler)."""
    logger = logging.getLogger("pilot")
    for handler in list(logger.handlers):
        if getattr(handler, "_wms_pilot", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler._wms_pilot = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(ContextFilter(pilot_id))
    logger.addHandler(handler)
    logger.setLevel(level.upper() if isinstance(level, str) else level)
    logger.propagate = False
    return logger
