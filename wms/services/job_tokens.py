"""Job tokens: what a payload presents to speak to the server about its own
job (docs/security.md, "Job tokens").

A job token is ``wmsj_<job id>.<attempt>.<signature>``, the signature an
HMAC-SHA256 of ``job:<job id>:<attempt>`` under the deployment's key. It
is stateless: the Matcher mints one with every hand-out without writing
anything (the match path's cost is budgeted, docs/benchmarks.md), and a
server checks it with the key and the job's row alone. What it may do is
access.py's (its own job's status and JDL, its application status), and
only while its attempt is alive: the job's row is read on every use, so
a token of an attempt that is over is refused at once, whatever any
cache holds.

The key is 32 random bytes in ``cluster_objects`` (kind ``job_token_key``,
hex): every server process and every server of a deployment signs and
checks with the same one. The first hand-out creates it, racing
processes agreeing on one row; each process reads it once and looks for
a newer version (a rotation) or a deleted row at most once per
KEY_SYNC_INTERVAL.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from datetime import datetime, timezone

from sqlalchemy.engine import Engine

from wms.core.errors import Unauthorized
from wms.core.identity import Identity
from wms.core.limits import INT32_MAX, INT64_MAX
from wms.db import cluster_objects as objects_db
from wms.db import jobs as jobs_db
from wms.db.engine import reading
from wms.services import access, stored_objects
from wms.services.retry import run_in_transaction
from wms.services.runtime import Runtime

PREFIX = "wmsj_"
KEY_KIND = "job_token_key"
KEY_BYTES = 32
# Seconds a process goes on with the key it holds before looking for a
# rotated one: after `wms admin job-token-key rotate`, tokens signed with
# the new key are accepted everywhere, and the old key's refused, this late.
KEY_SYNC_INTERVAL = 1.0
# Who the key row names as its writer.
KEY_WRITER = "wms"

# Canonical numbers only (no sign, no leading zero), so that each (job, attempt)
# has exactly one token; the signature is unpadded url-safe base64 of 32 bytes.
_TOKEN = re.compile(r"wmsj_([1-9][0-9]{0,18})\.([1-9][0-9]{0,9})\.([A-Za-z0-9_-]{43})")
MALFORMED = "invalid job token (not wmsj_<job id>.<attempt>.<signature>)"
BAD_SIGNATURE = "invalid job token (bad signature)"


def is_job_token(token: str) -> bool:
    return token.startswith(PREFIX)


def signature(key: bytes, job_id: int, attempt: int) -> str:
    digest = hmac.new(key, f"job:{job_id}:{attempt}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def mint(runtime: Runtime, job_id: int, attempt: int) -> str:
    """The job token of ``attempt`` of ``job_id``: no database write but the key's, once per deployment."""
    return f"{PREFIX}{job_id}.{attempt}.{signature(signing_key(runtime), job_id, attempt)}"


def parse(token: str) -> tuple[int, int, str]:
    """(job id, attempt, signature) of a job token's text, or Unauthorized: malformed."""
    found = _TOKEN.fullmatch(token)
    if found is None:
        raise Unauthorized(MALFORMED)
    job_id, attempt = int(found[1]), int(found[2])
    if job_id > INT64_MAX or attempt > INT32_MAX:
        raise Unauthorized(MALFORMED)
    return job_id, attempt, found[3]


def authenticate(runtime: Runtime, token: str, now: datetime) -> Identity:
    """The identity of a job token (role job, the job's owner, group and VO), or
    Unauthorized with one line saying why not: the signature, then the attempt."""
    job_id, attempt, mac = parse(token)
    key = current_key(runtime)
    if key is None or not hmac.compare_digest(mac, signature(key, job_id, attempt)):
        raise Unauthorized(BAD_SIGNATURE)
    with reading(runtime.engine) as conn:
        rows = jobs_db.get_jobs(conn, [job_id])
    identity = Identity(user="", group="", vo="", role=access.JOB, job_id=job_id, attempt=attempt)
    why = refusal(identity, rows[0] if rows else None)
    if why is not None:
        raise Unauthorized(why)
    row = rows[0]
    return Identity(user=row["owner"], group=row["owner_group"], vo=row["vo"], role=access.JOB,
                    job_id=job_id, attempt=attempt)


def refusal(identity: Identity, job: dict | None) -> str | None:
    """Why the job token ``identity`` no longer opens the API (one line), or None."""
    where = f"job token of job {identity.job_id} attempt {identity.attempt}"
    if job is None:
        return f"{where}: no such job"
    if access.job_token_holds(identity, job):
        return None
    if job["attempt"] != identity.attempt:
        return (f"{where}: that attempt is over (the job was handed out again: "
                f"attempt {job['attempt']} is {job['status']})")
    return f"{where}: that attempt is over (job is {job['status']})"


# ---------------------------------------------------------------- the key
def current_key(runtime: Runtime) -> bytes | None:
    """The key in force, as this process last read it (None: there is none, so no
    job token can be good); read again at most once per KEY_SYNC_INTERVAL, which
    finds a rotated key and a deleted row (the text is compared, not the version,
    so a row deleted and made again is noticed too)."""
    state = runtime.caches.stored_version(KEY_KIND)
    clock = time.monotonic()
    if clock - state.checked >= KEY_SYNC_INTERVAL:
        state.checked = clock
        with reading(runtime.engine) as conn:
            row = objects_db.get_object(conn, KEY_KIND)
        if row is None:             # none yet, or deleted: the next hand-out makes a new one
            runtime.caches.job_token_key = None
        else:
            _adopt(runtime, row)
    return runtime.caches.job_token_key


def signing_key(runtime: Runtime) -> bytes:
    """The key in force, made first if there is none (the first hand-out of a deployment)."""
    key = current_key(runtime)
    if key is not None:
        return key
    run_in_transaction(runtime.engine, lambda conn: objects_db.add_if_missing(
        conn, KEY_KIND, new_key_text(), KEY_WRITER, datetime.now(timezone.utc)))
    with reading(runtime.engine) as conn:
        row = objects_db.get_object(conn, KEY_KIND)
    if row is None:                 # deleted at this very moment: make it again next time
        raise RuntimeError("the job token key vanished while it was being made")
    return _adopt(runtime, row)


def _adopt(runtime: Runtime, row: dict) -> bytes:
    try:
        key = bytes.fromhex(row["text"].strip())
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise RuntimeError(f"the stored job token key (cluster_objects row {KEY_KIND!r}) is not "
                           f"{KEY_BYTES} bytes in hex: rotate it (wms admin job-token-key rotate)")
    runtime.caches.job_token_key = key
    stored_objects.adopted(runtime, KEY_KIND, row["version"])
    return key


def new_key_text() -> str:
    return secrets.token_bytes(KEY_BYTES).hex()


def rotate_key(engine: Engine, user: str, now: datetime) -> int:
    """A new key in place of the old (made if there was none); its version.

    Every job token handed out before ends: within KEY_SYNC_INTERVAL every
    server signs and checks with the new key only."""
    return run_in_transaction(engine, lambda conn: objects_db.put_object(conn, KEY_KIND, new_key_text(), user, now))
