"""The ``slurm`` computing-element backend: each pilot is a Slurm batch job.

Submission: one ``sbatch`` per pilot, the batch script (wms/backends/slurm_jobs.py)
on its stdin, carrying the pilot as a zipapp. The pilot's own token is put
in sbatch's environment as WMS_PILOT_TOKEN and exported to the job alone
(``--export=WMS_PILOT_TOKEN``):
it is on no command line and in no file the node's users can read; Slurm
keeps the job's environment in its controller's state directory, which is
only the SlurmUser's.

Status, once per cycle and cluster: ``squeue --states=all -j ID,ID,...``
(one call for all the pilots, never one per pilot). Slurm keeps a finished
job listed for ``MinJobAge`` seconds only (300 by default); a pilot no
longer listed is judged by the exit status its script wrote to
``<log_dir>/<pilot_id>.exit``: 0 Done, else Failed, none at all Aborted
(it vanished: cancelled before it started, lost with its node, purged).
When squeue itself fails (controller unreachable) nothing is said and the
pilots keep their states until the next cycle.

The log directory (pilot stdout and stderr, the exit files) must be the
same path on the SiteDirector's host and the worker nodes: a shared file
system, as for any Slurm site. A pilot's output is read from there, while
it runs too.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from wms.core.errors import InvalidInput
from wms.core.resources import QueueRef
from wms.backends.base import PILOT_TOKEN_ENV, PilotArgs, check_count, log_file, log_tail
from wms.backends.bundle import pilot_zipapp
from wms.backends.slurm_jobs import (
    PILOT_OPTIONS,
    SLURM_STATES,
    SlurmRef,
    batch_script,
    ended_state,
    exit_file,
    parse_sbatch,
    parse_squeue,
    sbatch_argv,
)

# Seconds a Slurm command may take before the cycle gives up on it.
COMMAND_TIMEOUT = 60


class SlurmError(RuntimeError):
    pass


class SlurmBackend:
    name = "slurm"
    emulates_queues = False
    parameters = ("Partition", "SlurmOptions", "SlurmConf")

    def __init__(self, log_dir: Path | str = "var/pilots", env: Mapping[str, str] | None = None) -> None:
        # Absolute: the path is written into the job, which runs elsewhere.
        self.log_dir = Path(log_dir).resolve()
        self.env = dict(env) if env is not None else None

    def _env(self, conf: str, **extra: str) -> dict[str, str]:
        env = dict(self.env if self.env is not None else os.environ)
        env.pop("WMS_TOKEN", None)
        env.pop(PILOT_TOKEN_ENV, None)
        if conf:
            env["SLURM_CONF"] = conf
        env.update(extra)
        return env

    def _run(self, argv: list[str], env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(argv, input=stdin, env=env, capture_output=True, text=True,
                                  timeout=COMMAND_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SlurmError(f"{argv[0]}: {exc}") from exc

    # -- submission ----------------------------------------------------------
    def submit_pilots(self, queue_ref: QueueRef, count: int, pilot_args: PilotArgs) -> list[str]:
        check_count(count, pilot_args)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        conf = str(pilot_args.options.get("SlurmConf") or "")
        extra = _split(pilot_args.options.get("SlurmOptions"))
        refs = []
        for pilot_id in pilot_args.pilot_ids:
            env = self._env(conf, **{PILOT_TOKEN_ENV: pilot_args.token_for(pilot_id)})
            exit_file(self.log_dir, pilot_id).unlink(missing_ok=True)
            argv = ["--url", pilot_args.url, "--pilot-id", pilot_id, *PILOT_OPTIONS, *pilot_args.argv]
            script = batch_script(pilot_zipapp(), argv, exit_file(self.log_dir, pilot_id))
            command = sbatch_argv(pilot_id, self.log_dir, pilot_args.options.get("Partition"), extra)
            answer = self._run(command, env, stdin=script)
            if answer.returncode != 0:
                raise SlurmError(f"sbatch failed ({answer.returncode}): {answer.stderr.strip()}")
            refs.append(str(SlurmRef(parse_sbatch(answer.stdout), pilot_id, conf)))
        return refs

    # -- status ----------------------------------------------------------------
    def status(self, backend_refs: Sequence[str]) -> dict[str, str]:
        by_cluster: dict[str, list[tuple[str, SlurmRef]]] = {}
        for ref in backend_refs:
            parsed = SlurmRef.parse(ref)
            if parsed is not None:
                by_cluster.setdefault(parsed.conf, []).append((ref, parsed))
        states: dict[str, str] = {}
        for conf, refs in by_cluster.items():
            listed = self._squeue(conf, [parsed.job_id for _, parsed in refs])
            if listed is None:
                continue
            for ref, parsed in refs:
                slurm_state = listed.get(parsed.job_id)
                if slurm_state is None:
                    states[ref] = ended_state(self._exit_status(parsed.pilot_id))
                elif slurm_state in SLURM_STATES:
                    states[ref] = SLURM_STATES[slurm_state]
        return states

    def _squeue(self, conf: str, job_ids: list[str]) -> dict[str, str] | None:
        """Job id -> Slurm state of those still listed; None if squeue failed."""
        command = ["squeue", "--noheader", "--states=all", f"--jobs={','.join(job_ids)}", "--format=%i %T"]
        try:
            answer = self._run(command, self._env(conf))
        except SlurmError:
            return None
        if answer.returncode != 0:
            # Every id unknown to Slurm is an error for squeue, not an empty list.
            return {} if "Invalid job id" in answer.stderr else None
        return parse_squeue(answer.stdout)

    def _exit_status(self, pilot_id: str) -> str | None:
        try:
            return exit_file(self.log_dir, pilot_id).read_text()
        except OSError:
            return None

    def kill(self, ref: str) -> None:
        parsed = SlurmRef.parse(ref)
        if parsed is None:
            raise InvalidInput(f"not a Slurm pilot reference: {ref!r}")
        answer = self._run(["scancel", parsed.job_id], self._env(parsed.conf))
        # A job that has ended, or that Slurm has forgotten, needs no cancelling.
        gone = ("already completing or completed", "Invalid job id")
        if answer.returncode != 0 and not any(text in answer.stderr for text in gone):
            raise SlurmError(f"scancel {parsed.job_id} failed ({answer.returncode}): {answer.stderr.strip()}")

    def output(self, ref: str, limit: int) -> str | None:
        """The end of the log Slurm writes for the job as it runs (sbatch --output), in the shared log directory."""
        parsed = SlurmRef.parse(ref)
        if parsed is None:
            raise InvalidInput(f"not a Slurm pilot reference: {ref!r}")
        return log_tail(log_file(self.log_dir, parsed.pilot_id), limit)


def _split(options: object) -> list[str]:
    """SlurmOptions (one string, checked at configuration load) as words."""
    return shlex.split(str(options)) if options else []
