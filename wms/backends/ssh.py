"""The ``ssh`` computing-element backend: pilots as processes on a remote
node, started over OpenSSH (the local backend, one ssh away).

Queue parameters: ``SSHHost`` (required), ``SSHUser``, ``SSHPort`` (22),
``SSHKey`` (the private key's path on the SiteDirector's host),
``SSHKnownHosts`` (a known_hosts file naming the node's host key; else the
user's own) and ``SSHDirectory`` (the pilots' directory on the node,
relative to the remote home; default ``.wms/pilots``). ssh runs in batch
mode and refuses a host whose key it does not know.

One ssh call starts all the pilots of a submission; one per node and
cycle asks for all its pilots' states and brings back the logs of those
that ended into ``log_dir`` (so `wms pilots --output` shows them). Each
pilot's token goes in the script on ssh's stdin and reaches that pilot in
its environment only (scripts: wms/backends/ssh_jobs.py).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from wms.core.errors import InvalidInput
from wms.core.resources import QueueRef
from wms.backends.base import PilotArgs, check_count, log_file, log_tail
from wms.backends.bundle import pilot_zipapp
from wms.backends.ssh_jobs import (
    DEFAULT_DIRECTORY,
    SshTarget,
    kill_script,
    parse_ref,
    parse_started,
    parse_status,
    status_script,
    submit_script,
)

# Seconds one ssh call may take before the cycle gives up on it.
COMMAND_TIMEOUT = 120


class SshError(RuntimeError):
    pass


def target_of(options: Mapping[str, Any]) -> SshTarget:
    """The node a queue's parameters name."""
    host = options.get("SSHHost")
    if not host:
        raise InvalidInput("Backend ssh needs the queue parameter SSHHost")
    return SshTarget(host=str(host), user=str(options.get("SSHUser") or ""), port=int(options.get("SSHPort") or 22),
                     key=str(options.get("SSHKey") or ""), known_hosts=str(options.get("SSHKnownHosts") or ""),
                     directory=str(options.get("SSHDirectory") or DEFAULT_DIRECTORY))


class SshBackend:
    name = "ssh"
    emulates_queues = False
    parameters = ("SSHHost", "SSHUser", "SSHPort", "SSHKey", "SSHKnownHosts", "SSHDirectory")

    def __init__(self, log_dir: Path | str = "var/pilots", env: Mapping[str, str] | None = None) -> None:
        self.log_dir = Path(log_dir)
        self.env = dict(env) if env is not None else None

    def _ssh(self, target: SshTarget, script: str) -> subprocess.CompletedProcess:
        env = dict(self.env if self.env is not None else os.environ)
        env.pop("WMS_TOKEN", None)
        env.pop("WMS_PILOT_TOKEN", None)
        try:
            return subprocess.run(target.ssh_argv(), input=script, env=env, capture_output=True, text=True,
                                  timeout=COMMAND_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SshError(f"ssh to {target.host}: {exc}") from exc

    def submit_pilots(self, queue_ref: QueueRef, count: int, pilot_args: PilotArgs) -> list[str]:
        check_count(count, pilot_args)
        target = target_of(pilot_args.options)
        pilots = [(pid, ["--url", pilot_args.url, "--pilot-id", pid, *pilot_args.argv], pilot_args.token_for(pid))
                  for pid in pilot_args.pilot_ids]
        answer = self._ssh(target, submit_script(target, pilot_zipapp(), pilots))
        started = parse_started(answer.stdout)
        if answer.returncode != 0 or len(started) != count:
            raise SshError(f"ssh to {target.host} ({answer.returncode}) started {len(started)} of {count} pilots: "
                           f"{answer.stderr.strip()[-500:]}")
        return [target.ref(started[number], pid) for number, pid in enumerate(pilot_args.pilot_ids)]

    def status(self, backend_refs: Sequence[str]) -> dict[str, str]:
        by_target: dict[SshTarget, list[tuple[str, str, str]]] = {}
        for ref in backend_refs:
            parsed = parse_ref(ref)
            if parsed is not None:
                target, pid, pilot_id = parsed
                by_target.setdefault(target, []).append((ref, pid, pilot_id))
        states: dict[str, str] = {}
        for target, pilots in by_target.items():
            try:
                answer = self._ssh(target, status_script(target, [(pid, pilot_id) for _, pid, pilot_id in pilots]))
            except SshError:
                continue                      # the node is unreachable: say nothing this cycle
            if answer.returncode != 0:
                continue
            found, logs = parse_status(answer.stdout)
            for number, (ref, _, pilot_id) in enumerate(pilots):
                if number in found:
                    states[ref] = found[number]
                if number in logs:
                    self._keep_log(pilot_id, logs[number])
        return states

    def _keep_log(self, pilot_id: str, text: bytes) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_file(self.log_dir, pilot_id).write_bytes(text)

    def kill(self, ref: str) -> None:
        parsed = parse_ref(ref)
        if parsed is None:
            raise InvalidInput(f"not an ssh pilot reference: {ref!r}")
        target, pid, pilot_id = parsed
        answer = self._ssh(target, kill_script(pid, pilot_id))
        if answer.returncode != 0:
            raise SshError(f"ssh to {target.host} to stop pilot {pilot_id} failed: {answer.stderr.strip()}")

    def output(self, ref: str, limit: int) -> str | None:
        """The end of the log brought back when the pilot ended; None before
        (the node is asked once a cycle, not once per reader)."""
        parsed = parse_ref(ref)
        if parsed is None:
            raise InvalidInput(f"not an ssh pilot reference: {ref!r}")
        return log_tail(log_file(self.log_dir, parsed[2]), limit)
