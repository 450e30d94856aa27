"""Tables of the job and task-queue store (SQLAlchemy Core).

One metadata for the whole database; Alembic migrations in
``wms/db/migrations`` create exactly these tables. Timestamps are stored as
timezone-naive UTC (``UtcDateTime`` converts), because MariaDB has no
timezone-aware type and the three databases must behave the same.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Double,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
)
from sqlalchemy.dialects import mysql

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING)


class UtcDateTime(TypeDecorator):
    """An aware UTC datetime in Python, a naive UTC column in the database."""

    impl = DateTime(timezone=False)
    cache_ok = True

    def load_dialect_impl(self, dialect):
        # MariaDB's DATETIME drops the fraction of a second unless asked:
        # keep microseconds there too, so the three databases agree.
        if dialect.name in ("mysql", "mariadb"):
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(DateTime(timezone=False))

    def process_bind_param(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(timezone.utc).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc)


# MariaDB wants a length on indexed strings; 255 keeps keys within limits.
Name = String(255)
# A long text column; MEDIUMTEXT-sized on MariaDB (JDLs may exceed 64 KiB).
LongText = Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")

# Pool and task-queue keys are hex digests.
Key = String(64)

jobs = Table(
    "jobs",
    metadata,
    Column("job_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("job_name", Name, nullable=False, default=""),
    Column("owner", Name, nullable=False),
    Column("owner_group", Name, nullable=False),
    Column("vo", Name, nullable=False),
    Column("status", String(32), nullable=False),
    Column("minor_status", String(512), nullable=False, default=""),
    # Before matching: one site, "Multiple" or "ANY"; after: where it runs.
    Column("site", Name, nullable=False, default="ANY"),
    # Site/CE/Queue once matched, "" before.
    Column("queue", String(767), nullable=False, default=""),
    Column("submit_pool", Key, nullable=True),
    Column("task_queue_id", Integer, ForeignKey("task_queues.tq_id"), nullable=True),
    Column("priority", Integer, nullable=False, default=0),
    Column("cpu_time", Integer, nullable=False, default=0),
    Column("submission_time", UtcDateTime, nullable=False),
    Column("last_update_time", UtcDateTime, nullable=False),
    # Filled by the Matcher and the pilot.
    Column("slots", Integer, nullable=False, default=1, server_default="1"),
    Column("pilot_id", Name, nullable=True),
    Column("host", Name, nullable=True),
    # A matched job goes back to Waiting when its pilot has not confirmed by then.
    Column("lease_expires", UtcDateTime, nullable=True),
    Column("matched_time", UtcDateTime, nullable=True),
    Column("start_time", UtcDateTime, nullable=True),
    Column("end_time", UtcDateTime, nullable=True),
    Column("heartbeat_time", UtcDateTime, nullable=True),
    Column("exit_code", Integer, nullable=True),
    Column("reschedule_count", Integer, nullable=False, default=0, server_default="0"),
    # Each hand-out of the job is an attempt: the claim counts it up, and
    # the pilot's reports quote it, so those of an earlier attempt are refused.
    Column("attempt", Integer, nullable=False, default=0, server_default="0"),
    # The holds on a Held job: Grid Engine's hold types (qhold -h), a letter
    # each of u (user), o (operator), s (system) (wms.core.states.HoldType);
    # None when nobody holds it.
    Column("hold_types", String(8), nullable=True),
    Index("ix_jobs_owner_status", "owner", "status"),
    Index("ix_jobs_status", "status"),
    # The lease reaper looks for matched jobs whose lease has run out.
    Index("ix_jobs_status_lease", "status", "lease_expires"),
    # The pool cleaner asks for a pool's jobs in given states.
    Index("ix_jobs_submit_pool", "submit_pool", "status"),
    # A VO's jobs counted by state at submission (wms.yaml caps.vo_*).
    Index("ix_jobs_vo_status", "vo", "status"),
    # Job ids are never reused, on SQLite too (INTEGER PRIMARY KEY alone
    # hands out a deleted highest id again).
    sqlite_autoincrement=True,
)

job_jdls = Table(
    "job_jdls",
    metadata,
    Column("job_id", ForeignKey("jobs.job_id", ondelete="CASCADE"), primary_key=True),
    # As the user wrote it (after parametric expansion)...
    Column("original_jdl", LongText, nullable=False),
    # ...and as the optimizer chain left it (Site, SubmitPool, Owner set).
    Column("jdl", LongText, nullable=False),
)

# The holds on a Held job, one row per hold type (wms.core.holds): who set
# it, why and when, so that `wms why`, the minor status and a release can
# say it. Written with the job's hold_types in one transaction; gone when
# the hold is released. No foreign key, as for the history below.
job_holds = Table(
    "job_holds",
    metadata,
    Column("job_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("hold_type", String(1), primary_key=True),
    Column("holder", Name, nullable=False),
    Column("reason", String(512), nullable=False, default=""),
    Column("time", UtcDateTime, nullable=False),
)

# Append-only and written in the same transaction as the job it describes,
# so it carries no foreign key: on PostgreSQL the key's check cost ~15 us a
# row, a third of a bulk submission's database time (three rows a job).
# Whatever removes jobs must remove their history with them.
status_history = Table(
    "status_history",
    metadata,
    Column("entry_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("job_id", BigInteger().with_variant(Integer, "sqlite"), nullable=False),
    Column("status", String(32), nullable=False),
    Column("minor_status", String(512), nullable=False, default=""),
    Column("source", String(128), nullable=False),
    Column("time", UtcDateTime, nullable=False),
    Index("ix_status_history_job_id", "job_id", "entry_id"),
)

submit_pools = Table(
    "submit_pools",
    metadata,
    Column("pool_id", Key, primary_key=True),
    # The canonical requirements as JSON: what the hash was computed from.
    Column("requirements", LongText, nullable=False),
    Column("vo", Name, nullable=False),
    Column("created", UtcDateTime, nullable=False),
    # When the eligible queues were last computed.
    Column("last_update", UtcDateTime, nullable=False),
    # When the last job using the pool left it; the cleaner's grace starts here.
    Column("last_used", UtcDateTime, nullable=False),
)

pool_queues = Table(
    "pool_queues",
    metadata,
    Column("pool_id", ForeignKey("submit_pools.pool_id", ondelete="CASCADE"), primary_key=True),
    # Shorter than Name: InnoDB keys hold at most 3072 bytes, and with
    # utf8mb4 (4 bytes a character) 64 + 3 * 255 characters would not fit.
    # CE names are host names (at most 253); sites and queues are short.
    Column("site", String(128), primary_key=True),
    Column("ce", Name, primary_key=True),
    Column("queue", String(128), primary_key=True),
    Column("updated", UtcDateTime, nullable=False),
    # getSubmitPoolsForQueue reads by queue.
    Index("ix_pool_queues_site_ce_queue", "site", "ce", "queue", "pool_id"),
)

task_queues = Table(
    "task_queues",
    metadata,
    Column("tq_id", Integer, primary_key=True, autoincrement=True),
    # Digest of the scheduling-relevant content: one task queue per distinct key.
    Column("tq_key", Key, nullable=False, unique=True),
    Column("owner", Name, nullable=False),
    Column("owner_group", Name, nullable=False),
    Column("vo", Name, nullable=False),
    Column("submit_pool", Key, nullable=True),
    # Upper bound of the CPUTime segment the jobs fall into.
    Column("cpu_time", Integer, nullable=False),
    # The scheduling definition as JSON (sites, banned sites, platforms,
    # tags, requirements expression, resource requests, ...).
    Column("definition", LongText, nullable=False),
    Column("priority", Integer, nullable=False, default=1),
    Column("created", UtcDateTime, nullable=False),
    # The advance reservation the jobs run in (qsub -ar), if any.
    Column("reservation_id", Integer, nullable=True),
    Index("ix_task_queues_submit_pool", "submit_pool"),
    Index("ix_task_queues_reservation_id", "reservation_id"),
    # Task-queue ids key caches: never reuse one (see jobs).
    sqlite_autoincrement=True,
)

# The claim: the best waiting job of a task queue. The index follows the
# ORDER BY exactly (priority descending, then oldest first); MariaDB
# otherwise scans and locks far more rows (DESIGN.md).
Index("ix_jobs_claim", jobs.c.task_queue_id, jobs.c.status, jobs.c.priority.desc(), jobs.c.job_id)

# Consumables in use: one row per scope and resource. Scopes are "global",
# "host:<name>" and "queue:<Site/CE/Queue>" (DESIGN.md, the three levels).
# The capacity comes from the configuration and is checked in the debit's
# WHERE clause, so a change of configuration needs no data migration.
Scope = String(600)

resource_usage = Table(
    "resource_usage",
    metadata,
    Column("scope", Scope, primary_key=True),
    Column("resource", String(64), primary_key=True),
    Column("used", Double, nullable=False, default=0),
)

# What each job holds, to be given back exactly when it ends.
job_debits = Table(
    "job_debits",
    metadata,
    Column("job_id", ForeignKey("jobs.job_id", ondelete="CASCADE"), primary_key=True),
    Column("scope", Scope, primary_key=True),
    Column("resource", String(64), primary_key=True),
    Column("amount", Double, nullable=False),
)

job_outputs = Table(
    "job_outputs",
    metadata,
    Column("job_id", ForeignKey("jobs.job_id", ondelete="CASCADE"), primary_key=True),
    Column("stdout", LongText, nullable=False),
    Column("stderr", LongText, nullable=False),
    Column("truncated", Boolean, nullable=False, default=False),
    Column("updated", UtcDateTime, nullable=False),
)

tokens = Table(
    "tokens",
    metadata,
    # SHA-256 of the bearer token: the token itself is never stored.
    Column("token_hash", String(64), primary_key=True),
    Column("user", Name, nullable=False),
    Column("user_group", Name, nullable=False),
    Column("vo", Name, nullable=False),
    Column("role", String(16), nullable=False),
    Column("description", String(255), nullable=False, default=""),
    Column("created", UtcDateTime, nullable=False),
    Column("expires", UtcDateTime, nullable=True),
    # The pilot a pilot-role token speaks for (None: not bound yet, or not a pilot's).
    Column("pilot_id", Name, nullable=True),
    # When the token was revoked; the row stays so that a refusal can say so.
    Column("revoked", UtcDateTime, nullable=True),
    # What the token's pilot declared (POST /pilots/token/renew) or the
    # SiteDirector gave it: the slots its token may hold at once (None: no
    # declaration, no cap; a later declaration may only lower it), and how
    # it isolates payloads (bubblewrap, apptainer, none) and why.
    Column("slots", Integer, nullable=True),
    Column("isolation", String(16), nullable=True),
    Column("isolation_note", String(255), nullable=True),
    Index("ix_tokens_pilot_id", "pilot_id"),
)

# Grid Engine objects changed at run time with qconf (the complex table now;
# resource quota sets later). The text is what `qconf -s..` prints; the
# version tells every server process to reload.
cluster_objects = Table(
    "cluster_objects",
    metadata,
    Column("kind", String(32), primary_key=True),
    Column("text", LongText, nullable=False),
    Column("version", Integer, nullable=False),
    Column("updated", UtcDateTime, nullable=False),
    Column("updated_by", Name, nullable=False),
)

# Pilots submitted by the SiteDirector (specs/002 "SiteDirectors"): one row
# per pilot, its queue, the computing-element backend that runs it and the
# backend's handle (a local process id, a batch job id, ...). Site and
# queue are as long as in pool_queues, so the (site, ce, queue, state) index
# fits InnoDB's key limit.
pilots = Table(
    "pilots",
    metadata,
    Column("pilot_id", Name, primary_key=True),
    Column("site", String(128), nullable=False),
    Column("ce", Name, nullable=False),
    Column("queue", String(128), nullable=False),
    Column("backend", String(32), nullable=False),
    # Empty until the backend has accepted the pilot.
    Column("backend_ref", Name, nullable=False, default=""),
    # Submitted, Running, Done, Failed, Aborted (wms.db.pilots.PILOT_STATES).
    Column("state", String(32), nullable=False),
    Column("jobs_run", Integer, nullable=False, default=0),
    Column("submitted", UtcDateTime, nullable=False),
    Column("last_update", UtcDateTime, nullable=False),
    # The VO whose token the pilot carries and whose jobs it runs (None: any, older pilots).
    Column("vo", Name, nullable=True),
    # How the pilot isolates payloads and why, as it last declared (None: it has not said).
    Column("isolation", String(16), nullable=True),
    Column("isolation_note", String(255), nullable=True),
    # The SiteDirector counts a queue's pilots by state.
    Index("ix_pilots_site_ce_queue_state", "site", "ce", "queue", "state"),
    Index("ix_pilots_state", "state"),
)

# One row per queue the SiteDirector has served: the row it locks while it
# counts the queue's pilots and records new ones, so that two directors
# running at once never both fill the same shortfall (docs/agents.md).
pilot_director_queues = Table(
    "pilot_director_queues",
    metadata,
    Column("site", String(128), primary_key=True),
    Column("ce", Name, primary_key=True),
    Column("queue", String(128), primary_key=True),
    Column("last_submission", UtcDateTime, nullable=True),
)

# Advance reservations (specs/003): one row each, kept after the end for
# qrstat -ar and accounting. States: w r x d E W (core/reservations/states.py).
reservations = Table(
    "reservations",
    metadata,
    Column("ar_id", Integer, primary_key=True, autoincrement=True),
    Column("name", Name, nullable=False, default=""),
    Column("owner", Name, nullable=False),
    Column("owner_group", Name, nullable=False),
    Column("vo", Name, nullable=False),
    Column("account", Name, nullable=False, default="sge"),
    Column("state", String(1), nullable=False),
    Column("submission_time", UtcDateTime, nullable=False),
    Column("start_time", UtcDateTime, nullable=False),
    Column("end_time", UtcDateTime, nullable=False),
    # JSON: the access list (-u), the request (-l, -q, -pe, -ckpt, -now)
    # and what was granted (slots per queue and host).
    Column("acl", LongText, nullable=False),
    Column("request", LongText, nullable=False),
    Column("granted", LongText, nullable=False),
    Column("mail_options", String(8), nullable=False, default="n"),
    Column("mail_list", String(1024), nullable=False, default=""),
    Column("hard_error", Boolean, nullable=False, default=False),
    # Why the reservation is in an error state (qrstat -explain).
    Column("message", String(1024), nullable=False, default=""),
    Column("updated", UtcDateTime, nullable=False),
    Index("ix_reservations_state", "state"),
    # Ids are chosen by the grant (core/reservations/ids.py: 1..9999999, then
    # the next unused); autoincrement stays for the schema the migrations made.
    sqlite_autoincrement=True,
)

# What each reservation takes from each consumable for its window, per
# queue (and host) it was granted on; scopes as in resource_usage.
reservation_bookings = Table(
    "reservation_bookings",
    metadata,
    Column("booking_id", Integer, primary_key=True, autoincrement=True),
    Column("ar_id", ForeignKey("reservations.ar_id", ondelete="CASCADE"), nullable=False),
    Column("scope", Scope, nullable=False),
    Column("resource", String(64), nullable=False),
    Column("amount", Double, nullable=False),
    Column("queue", String(767), nullable=False),
    Column("host", Name, nullable=False, default=""),
    Index("ix_reservation_bookings_ar_id", "ar_id"),
)

# One row per scope a grant books: a grant locks the rows of every scope it
# considers (in sorted order), so two grants never book the same slots,
# whatever the number of server processes. The matcher does not take them.
reservation_locks = Table(
    "reservation_locks",
    metadata,
    Column("scope", Scope, primary_key=True),
)

# One row per user ("user:<name>") and VO ("vo:<name>") whose jobs are capped
# (wms.yaml caps): a submission holds its rows while it counts and inserts, so
# two submissions of one user or VO never both pass the cap (wms/db/caps.py).
submission_locks = Table(
    "submission_locks",
    metadata,
    Column("scope", String(300), primary_key=True),
)

# -- sandboxes (wms/db/sandboxes.py; docs/architecture.md, "Sandboxes") --------
Digest = String(64)
# A piece of a stored file; LONGBLOB on MariaDB, whose BLOB holds 64 KiB only.
Bytes = LargeBinary().with_variant(mysql.LONGBLOB(), "mysql", "mariadb")

# Who uploaded which content for a submission: a job may name only input
# files its owner uploaded, so knowing a digest grants nothing.
sandbox_uploads = Table(
    "sandbox_uploads",
    metadata,
    Column("owner", Name, primary_key=True),
    Column("sha256", Digest, primary_key=True),
    Column("size", BigInteger, nullable=False),
    Column("uploaded", UtcDateTime, nullable=False),
    Index("ix_sandbox_uploads_sha256", "sha256"),
)

# The files of each job's sandboxes, by name in the job's directory.
sandbox_files = Table(
    "sandbox_files",
    metadata,
    Column("job_id", ForeignKey("jobs.job_id", ondelete="CASCADE"), primary_key=True),
    Column("kind", String(8), primary_key=True),
    Column("name", Name, primary_key=True),
    Column("sha256", Digest, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("created", UtcDateTime, nullable=False),
    # Output files: the job's hand-out (attempt) that sent them; only those
    # of its latest one are its output. Input files: 0.
    Column("attempt", Integer, nullable=False, default=0, server_default="0"),
    Index("ix_sandbox_files_sha256", "sha256"),
)

# The database store's content: each file in pieces of at most
# wms.core.sandboxes.CHUNK_BYTES, so no statement exceeds MariaDB's
# max_allowed_packet.
sandbox_chunks = Table(
    "sandbox_chunks",
    metadata,
    Column("sha256", Digest, primary_key=True),
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("data", Bytes, nullable=False),
    Column("stored", UtcDateTime, nullable=False),
)
