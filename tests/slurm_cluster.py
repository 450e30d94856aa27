"""A real one-node Slurm of the tests' own: munged, slurmctld and slurmd.

Everything lives in one temporary directory: a munge key and socket (the
machine's munged, if any, is not used), slurm.conf with free ports, the
controller's state, the node's spool, pid and log files. ``start()``
returns once the node is idle and ``stop()`` ends the daemons it started.

The daemons run as root (``SlurmUser=root``), the way a test machine or CI
container runs them; off root the tests skip with that reason.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.e2e.processes import stop
from tests.helpers import patience
from tests.servers import free_port

PARTITION = "debug"
# What a machine needs (Debian package names) and the commands they bring.
PACKAGES = {"slurm-wlm": ("slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo"),
            "munge": ("munged", "mungekey")}


def missing_packages() -> list[str]:
    """The packages whose commands are not on PATH (or the sbin directories)."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    return [package for package, commands in PACKAGES.items()
            if any(shutil.which(c, path=path) is None for c in commands)]


def why_not_runnable() -> str | None:
    """Why a private Slurm cannot start here, or None."""
    missing = missing_packages()
    if missing:
        return f"Slurm test cluster needs the packages {', '.join(missing)} (make test-packages)"
    if os.geteuid() != 0:
        return "Slurm test cluster needs root (slurmd runs as root)"
    return None


SLURM_CONF = """\
ClusterName=wmstest
SlurmctldHost={host}
SlurmUser=root
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
# Scheduling and clean-up without the production pauses.
SchedulerParameters=sched_interval=1
KillWait=5
MinJobAge=300
InactiveLimit=0
SlurmdTimeout=30
NodeName={host} CPUs=2 State=UNKNOWN
PartitionName={partition} Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


class SlurmCluster:
    def __init__(self) -> None:
        # Not pytest's tmp_path: munged wants every directory above its
        # socket searchable by all, and pytest's base directory is private.
        self.dir = Path(tempfile.mkdtemp(prefix="wms-slurm-"))
        self.dir.chmod(0o755)
        self.conf = self.dir / "slurm.conf"
        self.host = socket.gethostname().split(".")[0]
        self.processes: list[subprocess.Popen] = []

    @property
    def env(self) -> dict[str, str]:
        """The environment the client commands (sbatch, squeue, ...) need."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self, timeout: float = 60) -> "SlurmCluster":
        for sub in ("state", "spool"):
            (self.dir / sub).mkdir()
        key = self.dir / "munge.key"
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True, capture_output=True)
        munge_socket = self.dir / "munge.sock"
        self._daemon(["munged", "--foreground", f"--socket={munge_socket}", f"--key-file={key}",
                      f"--log-file={self.dir / 'munged.log'}", f"--pid-file={self.dir / 'munged.pid'}",
                      f"--seed-file={self.dir / 'munged.seed'}"], "munged.out")
        self._wait(lambda: munge_socket.exists(), timeout, "munged")
        self.conf.write_text(SLURM_CONF.format(
            host=self.host, ctld_port=free_port(), slurmd_port=free_port(), munge_socket=munge_socket,
            dir=self.dir, partition=PARTITION))
        self._daemon(["slurmctld", "-D", "-f", str(self.conf)], "slurmctld.out")
        self._daemon(["slurmd", "-D", "-f", str(self.conf)], "slurmd.out")
        self._wait(self._node_idle, timeout, "the Slurm node")
        return self

    def _daemon(self, argv: list[str], out: str) -> None:
        with open(self.dir / out, "wb") as log:
            self.processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL, env=self.env))

    def _node_idle(self) -> bool:
        answer = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env, capture_output=True, text=True)
        return answer.returncode == 0 and answer.stdout.strip() == "idle"

    def _wait(self, ready, timeout: float, what: str) -> None:
        timeout = patience(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"{process.args[0]} exited with {process.returncode}:\n{self.logs()}")
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"{what} not ready within {timeout} s:\n{self.logs()}")

    def logs(self) -> str:
        parts = []
        for name in ("munged.out", "slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out"):
            path = self.dir / name
            if path.exists():
                parts.append(f"--- {name}\n{path.read_text(errors='replace')[-2000:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Cancel what is left, stop the daemons (slurmd first), remove the directory."""
        subprocess.run(["scancel", "--full", "--partition", PARTITION], env=self.env, capture_output=True)
        for process in reversed(self.processes):
            stop(process)
        shutil.rmtree(self.dir, ignore_errors=True)
