"""Pure parts of the slurm backend: the batch script that carries the
pilot, the sbatch command, the backend reference, and Slurm's job states
read as pilot states. No process is started here (wms/backends/slurm.py
does that).

The batch script is a /bin/sh script holding the pilot as a base64
zipapp: the worker node needs python3 (and a POSIX shell with base64), not
this package. It unpacks the pilot into a private temporary directory,
runs it with ``--on-sigterm leave`` (a cancelled or preempted pilot leaves
its jobs for the server to run again), and writes the pilot's exit status
to ``<pilot_id>.exit`` beside its log, atomically. The script holds no
secret: the pilot's token travels in the job's environment
(``--export=WMS_PILOT_TOKEN``).
"""

from __future__ import annotations

import base64
import shlex
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from wms.backends.base import ABORTED, DONE, FAILED, RUNNING, SUBMITTED, log_file

# Slurm job states (squeue %T) as pilot states. COMPLETING: the script has
# ended but the node is still cleaning up; the pilot counts as running
# until Slurm is done with it.
SLURM_STATES = {
    **dict.fromkeys(("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"), SUBMITTED),
    **dict.fromkeys(("RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING",
                     "STAGE_OUT", "RESIZING"), RUNNING),
    "COMPLETED": DONE,
    **dict.fromkeys(("FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
                     "PREEMPTED", "SPECIAL_EXIT"), FAILED),
    **dict.fromkeys(("CANCELLED", "REVOKED"), ABORTED),
}

# How the pilot learns it should leave its jobs to the server on SIGTERM.
PILOT_OPTIONS = ("--on-sigterm", "leave")
_END = "WMS_PILOT_ZIPAPP"


@dataclass(frozen=True)
class SlurmRef:
    """A pilot's backend reference: ``<job id>:<pilot id>[:<slurm.conf>]``.

    The slurm.conf (when the queue names one) is part of it so that status
    and kill reach the cluster the pilot went to; a pilot id has no ':'.
    """

    job_id: str
    pilot_id: str
    conf: str = ""

    def __str__(self) -> str:
        return ":".join([self.job_id, self.pilot_id] + ([self.conf] if self.conf else []))

    @classmethod
    def parse(cls, ref: str) -> "SlurmRef | None":
        job_id, _, rest = ref.partition(":")
        pilot_id, _, conf = rest.partition(":")
        if not job_id.isdigit() or not pilot_id:
            return None
        return cls(job_id, pilot_id, conf)


def exit_file(log_dir: Path, pilot_id: str) -> Path:
    return log_dir / f"{pilot_id}.exit"


def batch_script(zipapp: bytes, pilot_argv: Sequence[str], exit_path: Path) -> str:
    """The script sbatch reads on stdin: unpack the pilot, run it, record its exit."""
    payload = "\n".join(textwrap.wrap(base64.b64encode(zipapp).decode("ascii"), 76))
    exit_q = shlex.quote(str(exit_path))
    return (
        "#!/bin/sh\n"
        "# A wms pilot; the pilot itself is the zipapp below.\n"
        "# Its token comes in the environment: moved to a pipe on fd 3, and the\n"
        "# script started again without it, so that no shell that lives as long\n"
        "# as the pilot holds it in its environment.\n"
        'if [ -n "${WMS_PILOT_TOKEN:-}" ]; then\n'
        "exec 3<<WMS_PILOT_TOKEN_END\n"
        "$WMS_PILOT_TOKEN\n"
        "WMS_PILOT_TOKEN_END\n"
        'exec env -u WMS_PILOT_TOKEN /bin/sh "$0" "$@"\n'
        "fi\n"
        "(true <&3) 2>/dev/null || exec 3</dev/null   # no token: the pilot says so\n"
        'work=$(mktemp -d "${TMPDIR:-/tmp}/wms-pilot.XXXXXX") || exit 1\n'
        "trap 'rm -rf \"$work\"' EXIT\n"
        f"base64 -d > \"$work/pilot.pyz\" <<'{_END}' || exit 1\n"
        f"{payload}\n"
        f"{_END}\n"
        f"python3 \"$work/pilot.pyz\" {shlex.join(pilot_argv)} --workdir \"$work/jobs\" --token-file - <&3 3<&-\n"
        "rc=$?\n"
        f"echo \"$rc\" > {exit_q}.tmp && mv {exit_q}.tmp {exit_q}\n"
        'exit "$rc"\n'
    )


def sbatch_argv(pilot_id: str, log_dir: Path, partition: str | None, extra: Sequence[str]) -> list[str]:
    """sbatch with the backend's own options first, then the queue's.

    ``--export=WMS_PILOT_TOKEN``: only the token goes from the SiteDirector's
    environment (which may hold database passwords) to the job; Slurm adds
    its SLURM_* variables and the pilot account's login environment.
    """
    argv = ["sbatch", "--parsable", f"--job-name=wms-{pilot_id}",
            f"--output={log_file(log_dir, pilot_id)}", f"--chdir={log_dir}", "--export=WMS_PILOT_TOKEN"]
    if partition:
        argv.append(f"--partition={partition}")
    return [*argv, *extra]


def parse_sbatch(stdout: str) -> str:
    """The job id of ``sbatch --parsable`` (``id`` or ``id;cluster``)."""
    job_id = stdout.strip().split(";", 1)[0]
    if not job_id.isdigit():
        raise ValueError(f"sbatch answered {stdout.strip()!r}, not a job id")
    return job_id


def parse_squeue(stdout: str) -> dict[str, str]:
    """``squeue -h -o '%i %T'`` lines -> job id -> Slurm state."""
    states = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return states


def ended_state(exit_status: str | None) -> str:
    """A pilot Slurm no longer lists: its recorded exit, or Aborted if it
    left none (cancelled before it ran, lost with its node, purged)."""
    if exit_status is None:
        return ABORTED
    return DONE if exit_status.strip() == "0" else FAILED
