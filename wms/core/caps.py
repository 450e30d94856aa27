"""Caps on how many jobs one user and one VO may have: Grid Engine's
``max_u_jobs`` (sge_conf(5): the most active jobs one user may have) and
Slurm's ``MaxSubmitJobs`` (sacctmgr(1): the most jobs pending or running at
once, per user or account), checked whole at submission.

Two counts, each capped per user and per VO (wms.yaml ``caps``; 0: no cap):

* ``jobs``: jobs not yet final (every state but Done, Failed, Killed), the
  cap of max_u_jobs and MaxSubmitJobs;
* ``waiting``: jobs not yet handed to a pilot (Received, Checking,
  Waiting), which is what a user can pile up without any resource.

A submission that would take a count past its cap is refused whole, with
the cap and the count; one that reaches the cap exactly is accepted. Pure
logic: the counts come from the database under the submission's lock
(wms/db/caps.py), so two submissions at once never both pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from wms.core.errors import Conflict
from wms.core.states import FINAL_STATES, JobStatus

#: The states of the two counts.
NOT_FINAL = tuple(sorted(s.value for s in JobStatus if s not in FINAL_STATES))
WAITING = (JobStatus.RECEIVED.value, JobStatus.CHECKING.value, JobStatus.WAITING.value)

#: Defaults of wms.yaml ``caps``: far above what one user of a working grid
#: holds, low enough that one user cannot fill the database by accident
#: (48,000 jobs were 6 s of submissions).
DEFAULT_USER_JOBS = 100_000
DEFAULT_USER_WAITING = 100_000
DEFAULT_VO_JOBS = 1_000_000
DEFAULT_VO_WAITING = 1_000_000


@dataclass(frozen=True)
class Caps:
    """wms.yaml ``caps``; 0 is no cap."""

    user_jobs: int = DEFAULT_USER_JOBS
    user_waiting: int = DEFAULT_USER_WAITING
    vo_jobs: int = DEFAULT_VO_JOBS
    vo_waiting: int = DEFAULT_VO_WAITING

    def of(self, scope: str) -> tuple[int, int]:
        """(jobs cap, waiting cap) of ``user`` or ``vo``."""
        return (self.user_jobs, self.user_waiting) if scope == "user" else (self.vo_jobs, self.vo_waiting)


class CapReached(Conflict):
    """A submission would take a user or a VO past a cap: 409, nothing stored."""


def check(caps: Caps, scope: str, name: str, jobs: int, waiting: int, adding: int) -> None:
    """Refuse (CapReached) ``adding`` new jobs of ``scope`` (``user`` or ``vo``) ``name``,
    which has ``jobs`` jobs not final and ``waiting`` of them waiting, when either count
    would pass its cap. New jobs count in both: they arrive Waiting."""
    jobs_cap, waiting_cap = caps.of(scope)
    for cap, count, what, key in ((jobs_cap, jobs, "jobs not yet final", "jobs"),
                                  (waiting_cap, waiting, "jobs waiting", "waiting")):
        if cap and count + adding > cap:
            raise CapReached(f"{scope} {name} has {count:,} {what}; the cap is {cap:,} (caps.{scope}_{key}); "
                             f"this submission adds {adding:,}")
