"""The pilot's token: where it comes from, and keeping it alive.

Where from (:func:`load_token`): ``--token`` (visible in ``ps`` to every
user of the node: for a quick test only), else ``--token-file`` (a file
only the pilot's user can read), else the environment (WMS_PILOT_TOKEN,
then WMS_TOKEN). The variables are removed from the pilot's environment
once read, so no job and no child process inherits them.

Keeping it alive (:class:`Keeper`): a pilot token is short-lived. The
pilot renews it (``POST /pilots/token/renew``) when half of what is left
of it has passed. What happens when renewal fails:

* the server cannot be reached, or answers 5xx/429: try again every
  RETRY_EVERY seconds (or sooner near the end) until the token expires;
* the server refuses (401: the token expired or was revoked; 403: the
  pilot has ended on the server's side, e.g. the SiteDirector killed it),
  or the token's end passes without a renewal: the pilot's reports would
  all be refused now, so it stops asking for jobs and ends the running
  ones without reporting them (as with ``--on-sigterm leave``: the server
  runs them again once their heartbeats stop), and exits with
  EXIT_CREDENTIAL.

A token without an end (``--lifetime never``) is never renewed. Each
renewal also carries the pilot's declaration: its slots (the server never
lets the token hold more) and how its payloads are isolated.

Out of a payload's reach (:func:`protect_process`, :func:`forget_token_file`):
the pilot marks itself non-dumpable at once (``prctl(PR_SET_DUMPABLE, 0)``),
so that no other process of its Unix user can read its memory, its
environment or its open files through /proc, nor attach to it with ptrace;
the token lives in its memory only. A token file is invisible to sandboxed
payloads (pilot/isolation.py); where they run unisolated, the pilot removes
the file once it has read it (unless told ``--keep-token-file``).

Standard library only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

from pilot.client import ApiError, Client, ClientError

log = logging.getLogger("pilot.credentials")

TOKEN_ENV = ("WMS_PILOT_TOKEN", "WMS_TOKEN")
STDIN = "-"
EXIT_CREDENTIAL = 3
CREDENTIAL_LOST = "Pilot credential lost"
PR_SET_DUMPABLE = 4
# Seconds between attempts after a failed renewal, and the shortest wait before one.
RETRY_EVERY = 60.0
MIN_WAIT = 5.0


def load_token(token: str | None, token_file: str | Path | None, env: MutableMapping[str, str],
               scrub: bool = False) -> str | None:
    """The bearer token: ``--token``, then ``--token-file`` (``-``: standard
    input, read to its end: how the SiteDirector hands it over), then
    WMS_PILOT_TOKEN, then WMS_TOKEN; ``scrub`` removes those variables from ``env``."""
    found: str | None = None
    if token:
        found = token.strip()
    elif token_file == STDIN:
        found = sys.stdin.read().strip()
        _forget_stdin()
    elif token_file:
        found = Path(token_file).read_text().strip()
    else:
        for name in TOKEN_ENV:
            value = env.get(name, "").strip()
            if value:
                found = value
                break
    if scrub:
        for name in TOKEN_ENV:
            env.pop(name, None)
    return found or None


def _forget_stdin() -> None:
    """Put /dev/null on descriptor 0 once the token is read from it. The
    backends hand the token over on standard input from a file they removed
    (ARC, Slurm) or a pipe (SSH, local): read to its end, it is still open,
    and a process the pilot starts without a standard input of its own
    would inherit it and could read the file again from its start."""
    if sys.stdin is None or sys.stdin.fileno() != 0:
        return              # not the process's own descriptor 0 (an embedding program's stream)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)


def protect_process() -> bool:
    """Make this process non-dumpable: its /proc files (environ, mem, fd, ...)
    become root's, and ptrace by processes of the same user is refused.
    True if done (Linux); the flag is not inherited across exec, so the
    jobs and the watchdog, which hold no token, are not affected."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        done = libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        done = False
    if not done:
        log.warning("could not make the pilot non-dumpable: processes of this user can read its memory")
    return done


def forget_token_file(path: str | Path, keep: bool = False) -> None:
    """Remove the token file the pilot has read: its payloads run unisolated and
    could read it. ``keep`` (--keep-token-file) leaves it, with a warning."""
    if str(path) == STDIN or not Path(path).is_file():
        return                      # standard input, a pipe: nothing stays behind
    if keep:
        log.warning("--keep-token-file: %s stays, readable by every unisolated payload of this pilot", path)
        return
    try:
        Path(path).unlink()
    except FileNotFoundError:
        return
    except OSError as exc:
        log.warning("could not remove the token file %s (%s): unisolated payloads can read it", path, exc)
        return
    log.warning("removed the token file %s: payloads run unisolated and could read it "
                "(--keep-token-file keeps it)", path)


def next_wait(expires_in: float) -> float:
    """Seconds until the next renewal when the token has ``expires_in`` seconds left: half of it."""
    return max(MIN_WAIT, expires_in / 2)


def retry_wait(left: float) -> float:
    """Seconds until the next attempt after a failed one, ``left`` seconds before the token's end."""
    return max(1.0, min(RETRY_EVERY, left / 4))


class Keeper:
    """Renews the pilot's token in a thread until ``stop`` is set; on a
    refusal or at the token's end calls ``lost(reason)`` once and ends."""

    def __init__(self, client: Client, pilot_id: str, stop: threading.Event,
                 lost: Callable[[str], Any], clock: Callable[[], float] = time.monotonic,
                 declaration: dict[str, Any] | None = None) -> None:
        self.client = client
        self.pilot_id = pilot_id
        self.declaration = declaration or {}
        self.stop = stop
        self.lost = lost
        self.clock = clock
        self.expires_at: float | None = None     # on self.clock; None: no end
        self.renewals = 0
        self.thread: threading.Thread | None = None
        self.failed: str | None = None

    def renew(self) -> bool:
        """One renewal; True if the token was renewed (or needs none).
        A refusal sets ``failed``; a network failure only returns False."""
        try:
            answer = self.client.renew_token(self.pilot_id, self.declaration)
        except ApiError as exc:
            if exc.status in (401, 403):
                self.failed = exc.detail
            log.error("token renewal failed: %s", exc)
            return False
        except ClientError as exc:
            log.warning("token renewal failed: %s", exc)
            return False
        expires_in = answer.get("ExpiresIn") if isinstance(answer, dict) else None
        self.expires_at = None if expires_in is None else self.clock() + float(expires_in)
        self.renewals += 1
        if expires_in is not None:
            log.info("token renewed: %d s left", int(expires_in))
        return True

    def start(self) -> bool:
        """The first renewal, then the thread. False if the server refused the token at once."""
        if not self.renew():
            if self.failed is not None:
                return False
            # Unreachable for now: the token's end is unknown; keep trying.
            self.expires_at = None
            self._spawn(retry_first=True)
            return True
        if self.expires_at is not None:
            self._spawn(retry_first=False)
        return True

    def _spawn(self, retry_first: bool) -> None:
        self.thread = threading.Thread(target=self._run, args=(retry_first,), name="token-keeper", daemon=True)
        self.thread.start()

    def _left(self) -> float:
        return float("inf") if self.expires_at is None else self.expires_at - self.clock()

    def _run(self, retry_first: bool) -> None:
        wait = RETRY_EVERY if retry_first else next_wait(self._left())
        while not self.stop.wait(wait):
            if self.renew():
                if self.expires_at is None:
                    return                      # no end: nothing more to do
                wait = next_wait(self._left())
                continue
            left = self._left()
            if self.failed is not None or left <= 0:
                reason = self.failed or "the token expired before it could be renewed"
                log.error("%s: %s; stopping", CREDENTIAL_LOST, reason)
                self.lost(reason)
                return
            wait = min(retry_wait(left), left)
