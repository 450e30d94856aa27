"""Periodic agents. Each agent is a plain function of
``(runtime, now)`` that the embedded scheduler and Celery both call.

``submit_pools.refresh`` recomputes the SubmitPools' eligible queues and
re-examines waiting jobs (specs/002).
"""
