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
* ``kill(ref)``: stop the pilot;
* ``output(ref, limit) -> str | None``: what the pilot printed (its stdout
  and stderr), at most the last ``limit`` bytes; None while there is none
  to show (`wms pilots --output`).

Each backend is one module of this package: ``local`` (wms/backends/local.py),
``slurm`` (slurm.py), ``ssh`` (ssh.py), ``arc`` (an ARC CE, arc.py), each
with its pure parts beside it (slurm_jobs.py, ssh_jobs.py, arc_jobs.py:
scripts, descriptions, references and states, no I/O); the registry by
name is wms/backends/registry.py (docs/agents.md). Every backend keeps a
pilot's log in ``<log_dir>/<pilot_id>.log`` (:func:`log_file`): the local
and Slurm pilots write it there as they run, the ssh and ARC backends
bring it there from the node or the CE when the pilot ends; ``output``
reads its end (:func:`log_tail`). Each pilot has a token of its
own (``pilot_args.token_for(pilot_id)``), which reaches it by its
environment (WMS_PILOT_TOKEN), never on a command line, where any user of
the node could read it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
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

    def output(self, ref: str, limit: int) -> str | None: ...


def log_file(log_dir: Path, pilot_id: str) -> Path:
    """Where a backend keeps a pilot's log."""
    return log_dir / f"{pilot_id}.log"


def log_tail(path: Path, limit: int) -> str | None:
    """The last ``limit`` bytes of a pilot's log, headed by how long it is
    when that is more (a pilot living for days may write a lot; the end
    says how it ended); None when there is no log (yet)."""
    try:
        with open(path, "rb") as file:
            size = file.seek(0, os.SEEK_END)
            file.seek(max(0, size - limit))
            text = file.read().decode(errors="replace")
    except FileNotFoundError:
        return None
    return text if size <= limit else f"(the last {limit} bytes of {size})\n{text}"


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
