"""Periodic agents. Each agent is a plain function of ``(runtime, now)``
returning a small report; the in-process scheduler of `wms up` / `wms
agents` calls it, and so will Celery beat in the distributed set-up.

Correctness never depends on running alone: every agent changes the
database with conditional updates, so two runs at once do no harm.
"""

# The Celery app for `celery -A agents worker|beat`; importing it reads no
# configuration and opens no connection (agents/celery_app.py).
from agents.celery_app import app

__all__ = ["app"]
