"""The Matcher's claim as one PostgreSQL function call.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22

On PostgreSQL a claim (pick the best waiting job of a task queue, debit
its consumables, record the debits and the history) is one call of
``wms_claim_job`` instead of seven round trips (docs/benchmarks.md). The
statements inside are those of wms/db/matching.py's generic path, which
SQLite keeps using, and of MariaDB's procedure (migration 0008): a change
to the claim is made in all three; the concurrency tests run all three.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# SQLSTATE raised when a debit does not fit; DETAIL holds its 1-based index.
CLAIM_FUNCTION = """
CREATE OR REPLACE FUNCTION wms_claim_job(
    p_tq_id integer, p_pilot text, p_site text, p_queue text, p_host text, p_slots integer,
    p_lease timestamp, p_minor text, p_now timestamp, p_source text,
    p_scopes text[], p_resources text[], p_amounts double precision[], p_capacities double precision[])
RETURNS TABLE (job_id bigint, cpu_time integer, jdl text)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_job bigint;
    v_cpu integer;
BEGIN
    -- A claim is a lease, not yet a hand-over: it commits without waiting
    -- for its WAL flush; the pilot's Running report, committed durably
    -- before the job starts, flushes it (docs/architecture.md).
    PERFORM set_config('synchronous_commit', 'off', true);
    UPDATE jobs AS j
       SET status = 'Matched', minor_status = p_minor, pilot_id = p_pilot, site = p_site, queue = p_queue,
           host = p_host, slots = p_slots, lease_expires = p_lease, matched_time = p_now,
           last_update_time = p_now
     WHERE j.job_id = (SELECT w.job_id FROM jobs AS w
                        WHERE w.task_queue_id = p_tq_id AND w.status = 'Waiting'
                        ORDER BY w.priority DESC, w.job_id
                        LIMIT 1 FOR UPDATE SKIP LOCKED)
       AND j.status = 'Waiting'
    RETURNING j.job_id, j.cpu_time INTO v_job, v_cpu;
    IF v_job IS NULL THEN
        RETURN;
    END IF;
    -- Debits in the caller's (sorted) order, so claimers lock usage rows
    -- in one order; one that does not fit aborts the whole claim.
    FOR i IN 1 .. coalesce(array_length(p_scopes, 1), 0) LOOP
        UPDATE resource_usage AS u
           SET used = u.used + p_amounts[i]
         WHERE u.scope = p_scopes[i] AND u.resource = p_resources[i]
           AND u.used + p_amounts[i] <= p_capacities[i];
        IF NOT FOUND THEN
            RAISE EXCEPTION 'consumable full' USING ERRCODE = 'WMS01', DETAIL = i::text;
        END IF;
    END LOOP;
    INSERT INTO job_debits (job_id, scope, resource, amount)
         SELECT v_job, d.s, d.r, d.a FROM unnest(p_scopes, p_resources, p_amounts) AS d(s, r, a);
    INSERT INTO status_history (job_id, status, minor_status, source, time)
         VALUES (v_job, 'Matched', p_minor, p_source, p_now);
    RETURN QUERY SELECT v_job, v_cpu, jj.jdl FROM job_jdls AS jj WHERE jj.job_id = v_job;
END
$fn$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(CLAIM_FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS wms_claim_job(integer, text, text, text, text, integer, timestamp, "
                   "text, timestamp, text, text[], text[], double precision[], double precision[])")
