"""A pilot's status reports taken in one call on PostgreSQL.

Revision ID: 0017_pilot_reports_function
Revises: 0016_job_hold_reasons
Create Date: 2026-11-29

``wms_pilot_reports``: the reports of a pilot's slots (Running, Done,
Failed), each taken only while the pilot holds its job in the attempt it
quotes, with their history entries, their outputs and the release of what
the ended jobs held, in one statement: one round trip and one transaction
for a call of the pilot, where the statements one by one took about ten.
MariaDB and SQLite take the same reports with the statements of
wms/db/pilot_reports.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0017_pilot_reports_function"
down_revision: str | None = "0016_job_hold_reasons"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FUNCTION_ARGS = ("bigint[], text[], integer[], text[], text[], text[], text[], timestamp[], integer[], "
                 "boolean[], text[], text[], boolean[], timestamp")

# A frozen copy of wms/db/sql/pilot_reports_postgresql.sql as of this revision.
REPORTS_FUNCTION = """
CREATE FUNCTION wms_pilot_reports(
    p_job_ids bigint[], p_pilots text[], p_attempts integer[], p_expect text[], p_statuses text[],
    p_minors text[], p_sources text[], p_end_times timestamp[], p_exit_codes integer[],
    p_has_output boolean[], p_stdouts text[], p_stderrs text[], p_truncated boolean[],
    p_now timestamp)
RETURNS bigint[]
LANGUAGE plpgsql AS $fn$
DECLARE
    v_taken bigint[] := '{}';
    v_ended bigint[] := '{}';
    v_running boolean;
    v_debit record;
BEGIN
    -- The reports come sorted by job, so concurrent callers lock job rows in one order.
    FOR i IN 1 .. coalesce(array_length(p_job_ids, 1), 0) LOOP
        v_running := p_statuses[i] = 'Running';
        -- Taken only while the pilot holds the job, in the attempt it quotes,
        -- in a state the report may leave (p_expect: comma-separated).
        UPDATE jobs AS j
           SET status = p_statuses[i], minor_status = p_minors[i], last_update_time = p_now,
               lease_expires = NULL,
               start_time = CASE WHEN v_running THEN p_now ELSE j.start_time END,
               heartbeat_time = CASE WHEN v_running THEN NULL ELSE j.heartbeat_time END,
               end_time = CASE WHEN v_running THEN j.end_time ELSE p_end_times[i] END,
               exit_code = CASE WHEN v_running THEN j.exit_code ELSE p_exit_codes[i] END
         WHERE j.job_id = p_job_ids[i] AND j.pilot_id = p_pilots[i]
           AND j.status = ANY (string_to_array(p_expect[i], ','))
           AND j.attempt = coalesce(p_attempts[i], j.attempt);
        CONTINUE WHEN NOT FOUND;
        v_taken := v_taken || p_job_ids[i];
        INSERT INTO status_history (job_id, status, minor_status, source, time)
             VALUES (p_job_ids[i], p_statuses[i], p_minors[i], p_sources[i], p_now);
        IF p_has_output[i] THEN
            DELETE FROM job_outputs AS o WHERE o.job_id = p_job_ids[i];
            INSERT INTO job_outputs (job_id, stdout, stderr, truncated, updated)
                 VALUES (p_job_ids[i], p_stdouts[i], p_stderrs[i], p_truncated[i], p_now);
        END IF;
        IF NOT v_running THEN
            v_ended := v_ended || p_job_ids[i];
        END IF;
    END LOOP;
    IF cardinality(v_ended) > 0 THEN
        -- The usage guard (a recount of the quota sets waits, or is waited
        -- for), then what the ended jobs held goes back, usage rows in key order.
        LOCK TABLE resource_usage IN ROW EXCLUSIVE MODE;
        FOR v_debit IN
            WITH given AS (DELETE FROM job_debits AS d WHERE d.job_id = ANY (v_ended)
                           RETURNING d.scope, d.resource, d.amount)
            SELECT g.scope, g.resource, sum(g.amount) AS amount FROM given AS g
             GROUP BY g.scope, g.resource ORDER BY g.scope, g.resource
        LOOP
            UPDATE resource_usage AS u SET used = u.used - v_debit.amount
             WHERE u.scope = v_debit.scope AND u.resource = v_debit.resource;
        END LOOP;
    END IF;
    RETURN v_taken;
END
$fn$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(REPORTS_FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP FUNCTION IF EXISTS wms_pilot_reports({FUNCTION_ARGS})")
