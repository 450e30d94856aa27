"""The tests' one-node Slurm: wms.bench.slurm's private cluster (munged,
slurmctld and slurmd in a directory of their own, on free ports) with two
CPUs and settings for tests. Its deadlines are scaled by WMS_TEST_PATIENCE;
off root, or without the packages, the tests skip with that reason.
"""

from __future__ import annotations

from tests.helpers import patience
from wms.bench.slurm import SlurmCluster as PrivateSlurm, why_not_runnable

__all__ = ["SlurmCluster", "why_not_runnable"]

# Scheduling and clean-up without the production pauses: the main loop
# every second, a killed job's processes gone after 5 s.
TEST_SETTINGS = {
    "SchedulerType": "sched/backfill",
    "SchedulerParameters": "sched_interval=1",
    "KillWait": "5",
    "MinJobAge": "300",
    "InactiveLimit": "0",
    "SlurmdTimeout": "30",
}


class SlurmCluster(PrivateSlurm):
    def __init__(self) -> None:
        super().__init__(cpus=2, settings=TEST_SETTINGS, name="wmstest")

    def start(self, timeout: float = 60) -> "SlurmCluster":
        super().start(patience(timeout))
        return self
