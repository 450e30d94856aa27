"""Queues whose pilots go to a real Slurm (``Backend: slurm``), over ssh
(``Backend: ssh``) or to an ARC CE (``Backend: arc``), for the end-to-end tests: their resources.yaml
entries, jobs only one of them can run, what is checked of their pilots,
and the clean-up of the pilots left at the end.

The Slurm is the session's one-node cluster (tests/slurm_cluster.py,
fixture ``slurm_cluster``), the ssh node the session's sshd on loopback
(tests/sshd_server.py, fixture ``ssh_server``), the ARC CE the session's
A-REX on loopback (tests/arc.py, fixture ``arc_ce``).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import select

from tests.e2e.processes import tails
from wms.db import schema
from wms.db.engine import make_engine
from wms.backends.slurm_jobs import SlurmRef
from wms.backends.ssh_jobs import parse_ref

SLURM_SITE = "E2E.Slurm.ch"
SLURM_QUEUE = f"{SLURM_SITE}/slurm.e2e.ch/batch"
SSH_SITE = "E2E.Ssh.ch"
SSH_QUEUE = f"{SSH_SITE}/node.e2e.ch/batch"
ARC_SITE = "E2E.Arc.ch"
ARC_QUEUE = f"{ARC_SITE}/arc.e2e.ch/fork"

# The one-node Slurm has two CPUs: two pilots of one CPU each.
SLURM_SITE_YAML = """\
  E2E.Slurm.ch:
    CEs:
      slurm.e2e.ch:
        Backend: slurm
        SlurmConf: {conf}
        Queues:
          batch: {{CPUTime: 86400, Partition: debug, SlurmOptions: "--time=10 --comment=wms-e2e",
                  MaxWaitingPilots: 2, MaxTotalPilots: 2, complex_values: {{slots: 2}}}}
"""
SSH_SITE_YAML = """\
  E2E.Ssh.ch:
    CEs:
      node.e2e.ch:
        Backend: ssh
        SSHHost: 127.0.0.1
        SSHPort: {port}
        SSHUser: {user}
        SSHKey: {key}
        SSHKnownHosts: {known_hosts}
        SSHDirectory: {directory}
        # The jobs print where they came from: the site passes ssh's variable on.
        JobEnv: [SSH_CONNECTION]
        Queues:
          batch: {{CPUTime: 86400, MaxWaitingPilots: 2, MaxTotalPilots: 2, complex_values: {{slots: 2}}}}
"""
# The CE's fork queue runs every job at once: two pilots at a time.
ARC_SITE_YAML = """\
  E2E.Arc.ch:
    CEs:
      arc.e2e.ch:
        Backend: arc
        ARCEndpoint: {endpoint}
        ARCCertificate: {cert}
        ARCKey: {key}
        ARCCAFile: {ca}
        Queues:
          fork: {{CPUTime: 86400, ARCQueue: fork, ARCRSL: '(walltime="30")', MaxWaitingPilots: 2,
                 MaxTotalPilots: 2, complex_values: {{slots: 2}}}}
"""


def resources(slurm_cluster: Any = None, ssh_server: Any = None, node_dir: Path | None = None,
              arc_ce: Any = None) -> str:
    """resources.yaml with the Slurm queue, the ssh queue (pilots in
    ``node_dir`` on the node), the ARC queue, or several of them."""
    text = "Sites:\n"
    if slurm_cluster is not None:
        text += SLURM_SITE_YAML.format(conf=slurm_cluster.conf)
    if ssh_server is not None:
        assert node_dir is not None
        text += SSH_SITE_YAML.format(port=ssh_server.port, user=ssh_server.user, key=ssh_server.client_key,
                                     known_hosts=ssh_server.known_hosts, directory=node_dir)
    if arc_ce is not None:
        text += ARC_SITE_YAML.format(endpoint=arc_ce.endpoint, cert=arc_ce.user_cert, key=arc_ce.user_key,
                                     ca=arc_ce.ca_file())
    return text


def site_jobs(site: str, name: str, count: int, command: str) -> str:
    """A parametric JDL of ``count`` jobs running ``sh -c COMMAND`` that only ``site`` may run."""
    return (f'[ JobName = "{name}_%n"; Executable = "/bin/sh"; Arguments = "-c \'{command}\'"; CPUTime = 300;'
            f' Site = "{site}"; Parameters = {count}; ]')


@contextmanager
def logs_on_failure(logs: list[Path]) -> Iterator[None]:
    """Print the tails of ``logs`` (directories: their pilot logs) when the
    block fails; pytest shows them with the failure."""
    try:
        yield
    except BaseException:
        print(tails(logs, size=6000))
        raise


# -- what is checked of the pilots ----------------------------------------------------
def check_slurm_pilot(pilot: dict[str, Any], slurm_cluster: Any) -> str:
    """A pilot of the Slurm queue is a Slurm job of the test's cluster; its job id."""
    assert pilot["Queue"] == SLURM_QUEUE and pilot["Backend"] == "slurm", pilot
    ref = SlurmRef.parse(pilot["BackendRef"])
    assert ref is not None and ref.pilot_id == pilot["PilotID"] and ref.conf == str(slurm_cluster.conf), pilot
    return ref.job_id


def check_ssh_pilot(pilot: dict[str, Any], ssh_server: Any, node_dir: Path) -> str:
    """A pilot of the ssh queue was started over ssh on the test's node; its pid there."""
    assert pilot["Queue"] == SSH_QUEUE and pilot["Backend"] == "ssh", pilot
    parsed = parse_ref(pilot["BackendRef"])
    assert parsed is not None, pilot
    target, pid, pilot_id = parsed
    assert (target.host, target.port, target.user) == ("127.0.0.1", ssh_server.port, ssh_server.user), pilot
    assert target.directory == str(node_dir) and pilot_id == pilot["PilotID"], pilot
    return pid


def pilots_ended(get: Callable[[], list[dict[str, Any]]]) -> Callable[[], list[dict[str, Any]] | None]:
    """A check for wait_until: every pilot ``get()`` lists has ended (the list)."""

    def check() -> list[dict[str, Any]] | None:
        shown = get()
        return shown if shown and all(p["State"] not in ("Submitted", "Running") for p in shown) else None

    return check


def check_consumables_returned(database_url: str) -> None:
    """Every consumable back (resource_usage all zero) and no job holding a debit."""
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            usage = conn.execute(select(schema.resource_usage)).all()
            debits = conn.execute(select(schema.job_debits)).all()
    finally:
        engine.dispose()
    assert usage, "no resource_usage row: the jobs debited nothing"
    assert all(row.used == 0 for row in usage), [tuple(row) for row in usage if row.used != 0]
    assert not debits, [tuple(row) for row in debits]


def jobs_by_pilot_backend(database_url: str) -> dict[int, tuple[str, str, str]]:
    """Job id -> (the job's queue, its pilot's Site/CE/Queue, its pilot's backend), from the tables."""
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(schema.jobs.c.job_id, schema.jobs.c.queue, schema.pilots.c.site, schema.pilots.c.ce,
                       schema.pilots.c.queue.label("pilot_queue"), schema.pilots.c.backend)
                .join(schema.pilots, schema.pilots.c.pilot_id == schema.jobs.c.pilot_id)).all()
    finally:
        engine.dispose()
    return {row.job_id: (row.queue, f"{row.site}/{row.ce}/{row.pilot_queue}", row.backend) for row in rows}


# -- clean-up ---------------------------------------------------------------------------
def stop_backend_pilots(backend_refs: list[str], slurm_cluster: Any = None) -> None:
    """Cancel the Slurm pilots and SIGKILL the ssh pilots (their node is
    this machine) still alive, once nothing starts new ones."""
    slurm_jobs = [parsed.job_id for ref in backend_refs if (parsed := SlurmRef.parse(ref or "")) is not None]
    if slurm_jobs and slurm_cluster is not None:
        subprocess.run(["scancel", *slurm_jobs], env=slurm_cluster.env, capture_output=True)
    for ref in backend_refs:
        parsed = parse_ref(ref or "")
        if parsed is None:
            continue
        _, pid, pilot_id = parsed
        try:
            if pilot_id.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.killpg(int(pid), signal.SIGKILL)   # the pilot's session (setsid): wrapper, pilot, jobs
        except (OSError, ProcessLookupError):
            pass
