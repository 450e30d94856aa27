"""Periodic agents. Each agent is a plain function of ``(runtime, now)``
returning a small report; the in-process scheduler of `wms up` / `wms
agents` calls it, and so will Celery beat in the distributed set-up.

Correctness never depends on running alone: every agent changes the
database with conditional updates, so two runs at once do no harm.
"""
