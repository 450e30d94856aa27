"""What every computing-element backend is: how the SiteDirector starts,
watches and stops pilots on a queue.

A backend is any object with

* ``name``: the value of the queue's ``Backend`` parameter that selects it;
* ``emulates_queues``: True when its pilots do not really run in the queue
  (the ``local`` backend stands in for every queue of resources.yaml), so
  the SiteDirector tells the pilot the queue's Platform and CPUTime instead
  of letting it probe the node;
* ``parameters``: the queue parameters it reads (given to it as
  ``pilot_args.options``);
* ``submit_pilots(queue_ref, count, pilot_args) -> list[str]``: start
  ``count`` pilots, returning one backend reference per pilot, in the order
  of ``pilot_args.pilot_ids``;
* ``status(backend_refs) -> dict[ref, state]``: the state of each pilot it
  knows (Submitted, Running, Done, Failed, Aborted); a reference it cannot
  judge is left out, and its pilot keeps its state;
* ``kill(ref)``: stop the pilot.

Each backend is one module of this package: ``local`` (wms/backends/local.py),
``slurm`` (slurm.py), ``ssh`` (ssh.py), ``arc`` (an ARC CE, arc.py), each
with its pure parts beside it (slurm_jobs.py, ssh_jobs.py, arc_jobs.py:
scripts, descriptions, references and states, no I/O); the registry by
name is wms/backends/registry.py (docs/agents.md). Every backend writes a
pilot's log to ``<log_dir>/<pilot_id>.log``, which `wms pilots --output`
reads. Each pilot has a token of its
own (``pilot_args.token_for(pilot_id)``), which reaches it by its
environment (WMS_PILOT_TOKEN), never on a command line, where any user of
the node could read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence

from wms.core.errors import InvalidInput
from wms.core.resources import QueueRef

SUBMITTED, RUNNING, DONE, FAILED, ABORTED = "Submitted", "Running", "Done", "Failed", "Aborted"
DEFAULT_BACKEND = "local"
# The variable that carries a pilot's token to it (pilot/client.py reads it).
PILOT_TOKEN_ENV = "WMS_PILOT_TOKEN"


@dataclass(frozen=True)
class PilotArgs:
    """What the pilots of one submission get.

    ``argv`` are the ``wms-pilot`` options common to them all (``--site``,
    ``--pools``, ...), without ``--url``, ``--token`` or ``--pilot-id``,
    which the backend adds: ``url`` and ``pilot_ids`` as options, each
    pilot's token through its environment. ``tokens`` are the pilots' own
    tokens by pilot id (the SiteDirector's); ``token`` the one for a pilot
    not in ``tokens`` (a backend driven by hand or by a test). ``options``
    are the queue's values of the backend's ``parameters`` (those the
    queue states).
    """

    url: str
    token: str = field(default="", repr=False)
    pilot_ids: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    tokens: Mapping[str, str] = field(default_factory=dict, repr=False)

    def token_for(self, pilot_id: str) -> str:
        return self.tokens.get(pilot_id, self.token)


def check_count(count: int, pilot_args: PilotArgs) -> None:
    if count != len(pilot_args.pilot_ids):
        raise ValueError(f"{count} pilots asked for but {len(pilot_args.pilot_ids)} pilot ids given")


class Backend(Protocol):
    name: str
    emulates_queues: bool
    parameters: tuple[str, ...]

    def submit_pilots(self, queue_ref: QueueRef, count: int, pilot_args: PilotArgs) -> list[str]: ...

    def status(self, backend_refs: Sequence[str]) -> dict[str, str]: ...

    def kill(self, ref: str) -> None: ...


# The wrapper writes the pilot's exit status next to its log, so any process
# on this host (a restarted `wms up`, another Celery worker child) can tell
# Done from Failed after the pilot is gone; $0 is the exit file.
EXIT_WRAPPER = '"$@"; rc=$?; echo "$rc" > "$0.tmp" && mv "$0.tmp" "$0"; exit "$rc"'


@dataclass
class PilotLauncher:
    """What the SiteDirector needs to start pilots: the server URL pilots
    talk to, the backends by name, and extra ``wms-pilot`` options for
    every pilot (e.g. ``--max-empty 3 --poll 5``). Each pilot's token is
    issued with its record (wms.services.pilots.reserve_pilots)."""

    url: str
    backends: dict[str, Backend]
    pilot_options: tuple[str, ...] = ()

    def backend(self, name: str) -> Backend:
        backend = self.backends.get(name)
        if backend is None:
            raise InvalidInput(f"no computing-element backend {name!r} (known: {', '.join(sorted(self.backends))})")
        return backend
