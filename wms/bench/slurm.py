"""A private one-node Slurm from Debian's packages: munged, slurmctld and slurmd.

Everything lives in one new directory: a munge key and socket (the
machine's munged, if any, is not used), slurm.conf with free ports, the
controller's state, the node's spool, pid and log files. ``start()``
returns once the node is idle; ``stop()`` cancels what is left, ends the
daemons it started and removes the directory.

Both `wms bench e2e --against slurm` (wms/bench/against_slurm.py) and the
tests (tests/slurm_cluster.py) start theirs here; each gives its own
settings (``settings``: slurm.conf lines beyond the common ones) and the
node's CPUs. ``SlurmdParameters=config_overrides`` lets the node claim more
CPUs than the machine has, so that a one-node Slurm offers as many job
slots as the run it is compared with.

The daemons run as root (``SlurmUser=root``), the way a test machine or CI
container runs them.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import cast

PARTITION = "debug"
# What a machine needs (Debian package names) and the commands they bring.
PACKAGES = {"slurm-wlm": ("slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo", "scontrol"),
            "munge": ("munged", "mungekey")}
# Seconds a daemon has to end after SIGTERM before SIGKILL.
STOP_GRACE = 15.0


def _search_path() -> str:
    """PATH and the sbin directories, where Debian puts the daemons."""
    return os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def missing_packages() -> list[str]:
    """The packages whose commands are not on PATH (or the sbin directories)."""
    path = _search_path()
    return [package for package, commands in PACKAGES.items()
            if any(shutil.which(c, path=path) is None for c in commands)]


def why_not_runnable() -> str | None:
    """Why a private Slurm cannot start here, or None."""
    missing = missing_packages()
    if missing:
        return f"a private Slurm needs the packages {', '.join(missing)} (make test-packages)"
    if os.geteuid() != 0:
        return "a private Slurm needs root (slurmd runs as root)"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# What every cluster of ours has: its own ports, munge socket and files;
# no accounting; processes tracked by the light linuxproc plugin, no task
# plugin (no cgroups in a container).
COMMON_CONF = """\
ClusterName={name}
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
SlurmdParameters=config_overrides
"""
NODE_CONF = """\
NodeName={host} CPUs={cpus} State=UNKNOWN
PartitionName={partition} Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def render_conf(name: str, host: str, cpus: int, ctld_port: int, slurmd_port: int, munge_socket: Path,
                directory: Path, settings: Mapping[str, str]) -> str:
    """slurm.conf: the common lines, then ``settings`` (``Key`` -> value), then the node and its partition."""
    common = COMMON_CONF.format(name=name, host=host, ctld_port=ctld_port, slurmd_port=slurmd_port,
                                munge_socket=munge_socket, dir=directory)
    own = "".join(f"{key}={value}\n" for key, value in settings.items())
    return common + own + NODE_CONF.format(host=host, cpus=cpus, partition=PARTITION)


def stop_process(process: subprocess.Popen, grace: float = STOP_GRACE) -> None:
    """SIGTERM, then SIGKILL when it has not ended within ``grace`` seconds."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class SlurmCluster:
    """One node (this host) with ``cpus`` CPUs in partition ``debug``.

    ``settings``: slurm.conf lines of this cluster's own (scheduler and its
    parameters, time-outs); ``munge_threads``: munged's --num-threads
    (None: munged's default).
    """

    def __init__(self, cpus: int, settings: Mapping[str, str], name: str = "wms",
                 munge_threads: int | None = None) -> None:
        self.cpus = cpus
        self.settings = dict(settings)
        self.name = name
        self.munge_threads = munge_threads
        # Not a private temporary directory such as pytest's: munged wants
        # every directory above its socket searchable by all.
        self.dir = Path(tempfile.mkdtemp(prefix="wms-slurm-"))
        self.dir.chmod(0o755)
        self.conf = self.dir / "slurm.conf"
        self.host = socket.gethostname().split(".")[0]
        self.processes: list[subprocess.Popen] = []

    @property
    def env(self) -> dict[str, str]:
        """The environment the client commands (sbatch, squeue, ...) need."""
        return {**os.environ, "SLURM_CONF": str(self.conf), "PATH": _search_path()}

    def start(self, timeout: float = 60) -> "SlurmCluster":
        for sub in ("state", "spool"):
            (self.dir / sub).mkdir()
        key = self.dir / "munge.key"
        subprocess.run([self._command("mungekey"), "--create", f"--keyfile={key}"], check=True, capture_output=True)
        munge_socket = self.dir / "munge.sock"
        threads = [f"--num-threads={self.munge_threads}"] if self.munge_threads else []
        self._daemon([self._command("munged"), "--foreground", f"--socket={munge_socket}", f"--key-file={key}",
                      f"--log-file={self.dir / 'munged.log'}", f"--pid-file={self.dir / 'munged.pid'}",
                      f"--seed-file={self.dir / 'munged.seed'}", *threads], "munged.out")
        self._wait(munge_socket.exists, timeout, "munged")
        self.conf.write_text(render_conf(self.name, self.host, self.cpus, free_port(), free_port(), munge_socket,
                                         self.dir, self.settings))
        self._daemon([self._command("slurmctld"), "-D", "-f", str(self.conf)], "slurmctld.out")
        self._daemon([self._command("slurmd"), "-D", "-f", str(self.conf)], "slurmd.out")
        self._wait(self._node_idle, timeout, "the Slurm node")
        return self

    def _command(self, name: str) -> str:
        found = shutil.which(name, path=_search_path())
        if found is None:
            raise RuntimeError(f"{name} not found: {why_not_runnable()}")
        return found

    def _daemon(self, argv: list[str], out: str) -> None:
        # The daemons end with the process that started them (a bench or a test
        # killed half-way leaves no Slurm behind): setpriv's parent-death signal.
        if shutil.which("setpriv"):
            argv = ["setpriv", "--pdeathsig", "TERM", *argv]
        with open(self.dir / out, "wb") as log:
            self.processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL, env=self.env))

    def _node_idle(self) -> bool:
        answer = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env, capture_output=True, text=True)
        return answer.returncode == 0 and answer.stdout.strip() == "idle"

    def _wait(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    program = Path(cast(list[str], process.args)[0]).name
                    raise RuntimeError(f"{program} exited with {process.returncode}:\n{self.logs()}")
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"{what} not ready within {timeout:g} s:\n{self.logs()}")

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
            stop_process(process)
        shutil.rmtree(self.dir, ignore_errors=True)
