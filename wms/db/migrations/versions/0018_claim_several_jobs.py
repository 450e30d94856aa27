"""The claim takes several jobs of a task queue in one call on PostgreSQL.

Revision ID: 0018_claim_several_jobs
Revises: 0017_pilot_reports_function
Create Date: 2026-11-29

``wms_claim_jobs`` replaces ``wms_claim_job``: the same claim, repeated up
to a count of jobs of one task queue in one call and one transaction
(the Matcher asks for as many as a pilot's batch drew from that task
queue). Each job is taken as a claim of its own would take it; a later
job is taken only while every debit still fits, and one that does not
ends the batch instead of refusing it. MariaDB and SQLite keep the claim
of one job (the Matcher repeats it there).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0018_claim_several_jobs"
down_revision: str | None = "0017_pilot_reports_function"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_FUNCTION_ARGS = ("integer, text, text, text, text, integer, timestamp, text, timestamp, text, "
                     "text[], text[], double precision[], double precision[], integer")
FUNCTION_ARGS = ("integer, integer, text, text, text, text, integer, timestamp, text, timestamp, text, "
                 "text[], text[], double precision[], double precision[], integer")

# A frozen copy of wms/db/sql/claim_postgresql.sql as of this revision.
CLAIM_FUNCTION = """
CREATE FUNCTION wms_claim_jobs(
    p_tq_id integer, p_count integer, p_pilot text, p_site text, p_queue text, p_host text, p_slots integer,
    p_lease timestamp, p_minor text, p_now timestamp, p_source text,
    p_scopes text[], p_resources text[], p_amounts double precision[], p_capacities double precision[],
    p_rules_version integer)
RETURNS TABLE (job_id bigint, cpu_time integer, jdl text, attempt integer)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_job bigint;
    v_cpu integer;
    v_attempt integer;
    v_minor text;
BEGIN
    -- A claim is a lease, not yet a hand-over: it commits without waiting
    -- for its WAL flush; the pilot's Running report, committed durably
    -- before the job starts, flushes it (docs/architecture.md).
    PERFORM set_config('synchronous_commit', 'off', true);
    -- The usage guard: waits for a recount of the quota sets in progress,
    -- then the claim must have applied the sets now stored.
    LOCK TABLE resource_usage IN ROW EXCLUSIVE MODE;
    IF coalesce((SELECT o.version FROM cluster_objects AS o WHERE o.kind = 'rqs'), 0) <> p_rules_version THEN
        RAISE EXCEPTION 'resource quota sets changed' USING ERRCODE = 'WMS02';
    END IF;
    -- Up to p_count jobs of the task queue, each as a claim of its own would
    -- take it: the best waiting job, every debit, the debits recorded, the
    -- history. A later job is taken only if all its debits still fit: the
    -- usage rows are this transaction's since the first job's debits, so the
    -- check holds until the commit. The first job's refusal is the caller's
    -- to hear; a later one only ends the batch.
    FOR k IN 1 .. greatest(p_count, 1) LOOP
        IF k > 1 AND EXISTS (
            SELECT 1 FROM unnest(p_scopes, p_resources, p_amounts, p_capacities) AS d(s, r, a, c)
                 LEFT JOIN resource_usage AS u ON u.scope = d.s AND u.resource = d.r
             WHERE u.used IS NULL OR u.used + d.a > d.c) THEN
            EXIT;
        END IF;
        UPDATE jobs AS j
           SET status = 'Matched', minor_status = p_minor || ' (attempt ' || (j.attempt + 1) || ')',
               pilot_id = p_pilot, site = p_site, queue = p_queue, host = p_host, slots = p_slots,
               lease_expires = p_lease, matched_time = p_now, last_update_time = p_now, attempt = j.attempt + 1
         WHERE j.job_id = (SELECT w.job_id FROM jobs AS w
                            WHERE w.task_queue_id = p_tq_id AND w.status = 'Waiting'
                            ORDER BY w.priority DESC, w.job_id
                            LIMIT 1 FOR UPDATE SKIP LOCKED)
           AND j.status = 'Waiting'
        RETURNING j.job_id, j.cpu_time, j.attempt, j.minor_status INTO v_job, v_cpu, v_attempt, v_minor;
        EXIT WHEN v_job IS NULL;
        -- Debits in the caller's (sorted) order, so claimers lock usage rows
        -- in one order; one that does not fit aborts the whole claim, naming
        -- its 0-based index as MariaDB's procedure does.
        FOR i IN 1 .. coalesce(array_length(p_scopes, 1), 0) LOOP
            UPDATE resource_usage AS u
               SET used = u.used + p_amounts[i]
             WHERE u.scope = p_scopes[i] AND u.resource = p_resources[i]
               AND u.used + p_amounts[i] <= p_capacities[i];
            IF NOT FOUND THEN
                RAISE EXCEPTION 'consumable full' USING ERRCODE = 'WMS01', DETAIL = (i - 1)::text;
            END IF;
        END LOOP;
        INSERT INTO job_debits (job_id, scope, resource, amount)
             SELECT v_job, d.s, d.r, d.a FROM unnest(p_scopes, p_resources, p_amounts) AS d(s, r, a);
        INSERT INTO status_history (job_id, status, minor_status, source, time)
             VALUES (v_job, 'Matched', v_minor, p_source, p_now);
        RETURN QUERY SELECT v_job, v_cpu, jj.jdl, v_attempt FROM job_jdls AS jj WHERE jj.job_id = v_job;
    END LOOP;
END
$fn$
"""


def _previous() -> str:
    """The function of migration 0009 (the text to restore on downgrade)."""
    path = next(Path(__file__).parent.glob("0009_*.py"))
    spec = importlib.util.spec_from_file_location("wms_migration_0009", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CLAIM_FUNCTION


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP FUNCTION IF EXISTS wms_claim_job({OLD_FUNCTION_ARGS})")
        op.execute(CLAIM_FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP FUNCTION IF EXISTS wms_claim_jobs({FUNCTION_ARGS})")
        op.execute(_previous())
