"""SiteDirector (specs/002 "SiteDirectors"): keeps pilots going to the
queues that have work.

For each configured queue: the pools it can serve (getSubmitPoolsForQueue),
the waiting jobs of those pools (and of jobs without Requirements) that the
static scheduling rules allow there, the pilots already Submitted or
Running there (states refreshed from the backends first), and the queue's
limits (MaxWaitingPilots, MaxTotalPilots, complex_values slots). It then
submits the missing pilots through the queue's backend (resources.yaml
``Backend``, default ``local``), with the queue's pools as ``--pools``,
per VO with waiting jobs: each pilot carries its own token of that VO, and
the queue's VO block may cap that VO's pilots (MaxWaitingPilots,
MaxTotalPilots there). Where its last rounds of pilots for a VO ended
without running anything, it waits before sending more, longer after
each such round, until one there runs a job (wms.core.pilot_backoff).

Safe to run twice at once: the count and the new pilot records are one
transaction under the queue's lock row (wms.services.pilots.reserve_pilots;
docs/agents.md).
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Any, Callable

from billiard.exceptions import SoftTimeLimitExceeded

from wms.core.scheduling import parameter
from wms.services import pilots as pilots_service
from wms.backends.base import DEFAULT_BACKEND, PilotLauncher
from wms.services.runtime import Runtime

log = logging.getLogger("wms.agents.site_director")


def site_director(runtime: Runtime, now: datetime, *, launcher: PilotLauncher) -> dict[str, Any]:
    """One SiteDirector cycle; a report: ``pilots_changed`` (by new state),
    ``submitted`` (queue -> pilots started), ``queues`` (queue -> waiting
    jobs, pilots seen, pilots submitted) and ``errors`` (queue -> message)."""
    changed = pilots_service.refresh_pilots(runtime, launcher, now)
    resources = runtime.resources_for(None)
    work = pilots_service.waiting_jobs_per_queue(runtime, now=now)
    report: dict[str, Any] = {"pilots_changed": changed, "submitted": {}, "queues": {}, "errors": {}}
    for ref in resources.queues():
        entry = work[ref.name]
        if entry["waiting"] == 0:
            continue
        params = resources.queue_parameter_map(ref)
        backend_name = str(parameter(params, "Backend") or DEFAULT_BACKEND)
        limits = pilots_service.QueueLimits.of(params)
        # One VO's pilots at a time: each carries a token of its VO and runs
        # that VO's jobs; a VO block of the queue may cap them.
        for vo, waiting in entry["by_vo"].items():
            if waiting == 0:
                continue
            vo_params = runtime.resources_for(vo).queue_parameter_map(ref)
            # Its last pilots there ran nothing: wait before sending more (core/pilot_backoff.py).
            until = pilots_service.paused_until(runtime, ref, vo)
            if until is not None and until > now:
                seen = report["queues"].setdefault(ref.name, {"waiting_jobs": entry["waiting"], "new": 0, "vo": {}})
                seen["vo"][vo] = {"waiting_jobs": waiting, "new": 0, "paused_until": until.isoformat()}
                log.info("SiteDirector: no pilot of %s to %s until %s: its last pilots there ran nothing",
                         vo, ref.name, until.isoformat())
                continue
            try:
                backend = launcher.backend(backend_name)
                reserved = pilots_service.reserve_pilots(runtime, ref, backend_name, vo, waiting, limits,
                                                         pilots_service.QueueLimits.of(vo_params), now)
                seen = report["queues"].setdefault(ref.name, {"waiting_jobs": entry["waiting"], **reserved.counts,
                                                               "new": 0, "vo": {}})
                seen["new"] += len(reserved.pilot_ids)
                seen["vo"][vo] = {"waiting_jobs": waiting, **reserved.vo_counts, "new": len(reserved.pilot_ids)}
                if not reserved.pilot_ids:
                    continue
                argv = pilots_service.pilot_argv(ref, entry["pools"], vo_params, limits, backend.emulates_queues,
                                                 launcher.pilot_options)
                pilots_service.launch_pilots(runtime, launcher, ref, backend_name, reserved, argv, now,
                                             pilots_service.backend_options(backend, vo_params))
            except SoftTimeLimitExceeded:
                # Celery's soft time limit: the run's time is up. Going on to
                # the next queues, the hard limit would kill it midway (pilots
                # recorded without a backend reference, perhaps started).
                log.warning("SiteDirector: out of time during the submission to %s for %s; the next run goes on",
                            ref.name, vo)
                raise
            except Exception as exc:  # noqa: BLE001 - one queue's failure must not stop the others
                log.exception("SiteDirector: submission to %s for %s failed", ref.name, vo)
                report["errors"][ref.name] = str(exc)
                continue
            count = len(reserved.pilot_ids)
            report["submitted"][ref.name] = report["submitted"].get(ref.name, 0) + count
            log.info("SiteDirector: %d pilot(s) of %s to %s for %d waiting job(s)", count, vo, ref.name, waiting)
    return report


# One launcher per process and database (pilots' tokens are issued per pilot).
_launchers: dict[tuple[str, str], PilotLauncher] = {}
_launchers_lock = threading.Lock()


def default_launcher(runtime: Runtime, now: datetime, url: str | None = None,
                     log_dir: str | None = None) -> PilotLauncher:
    """The process's launcher for ``runtime``'s database: created on first
    use, then reused. For `wms agents` / Celery, where no caller holds a launcher."""
    key = (runtime.engine.url.render_as_string(hide_password=False), url or pilots_service.server_url(runtime))
    with _launchers_lock:
        launcher = _launchers.get(key)
        if launcher is None:
            launcher = _launchers[key] = pilots_service.make_launcher(
                runtime, url=key[1], log_dir=log_dir or runtime.config.settings.pilot_log_dir)
        return launcher


def agent(launcher: PilotLauncher | None = None) -> Callable[[Runtime, datetime], dict[str, Any]]:
    """The SiteDirector as an ``(runtime, now)`` agent for agents.registry /
    the scheduler: with ``launcher``, or the process's default one."""

    def run(runtime: Runtime, now: datetime) -> dict[str, Any]:
        return site_director(runtime, now, launcher=launcher or default_launcher(runtime, now))

    return run
