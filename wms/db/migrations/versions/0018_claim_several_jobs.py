"""The claim takes several jobs of a task queue in one call on PostgreSQL.

Revision ID: 0018_claim_several_jobs
Revises: 0017_pilot_reports_function
Create Date: 2026-11-29

``wms_claim_jobs`` replaces ``wms_claim_job``, as a PostgreSQL function
and a MariaDB procedure: the same claim, repeated up to a count of jobs
of one task queue in one call and one transaction (the Matcher asks for
as many as a pilot's batch drew from that task queue). Each job is taken
as a claim of its own would take it; a later job is taken only while
every debit still fits, and one that does not ends the batch instead of
refusing it. SQLite keeps the statements of one claim (the Matcher
repeats them there).
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


# A frozen copy of wms/db/sql/claim_mariadb.sql as of this revision.
CLAIM_PROCEDURE = """
CREATE PROCEDURE wms_claim_jobs(
    IN p_tq_id INT, IN p_count INT, IN p_pilot VARCHAR(255), IN p_site VARCHAR(255), IN p_queue VARCHAR(767),
    IN p_host VARCHAR(255), IN p_slots INT, IN p_lease DATETIME(6), IN p_minor VARCHAR(512),
    IN p_now DATETIME(6), IN p_source VARCHAR(128), IN p_debits LONGTEXT, IN p_rules_version INT)
BEGIN
    DECLARE v_job BIGINT DEFAULT NULL;
    DECLARE v_cpu INT DEFAULT NULL;
    DECLARE v_version INT DEFAULT 0;
    DECLARE v_attempt INT DEFAULT NULL;
    DECLARE v_minor VARCHAR(512);
    DECLARE v_i INT DEFAULT 0;
    DECLARE v_k INT DEFAULT 0;
    DECLARE v_n INT DEFAULT JSON_LENGTH(p_debits);
    DECLARE v_jobs LONGTEXT DEFAULT '[]';
    DECLARE v_scope VARCHAR(767);
    DECLARE v_resource VARCHAR(64);
    DECLARE v_amount DOUBLE;
    DECLARE v_capacity DOUBLE;
    DECLARE v_used DOUBLE;
    DECLARE v_message VARCHAR(64);
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_job = NULL, v_used = NULL;
    -- The usage guard: waits for a recount of the quota sets in progress
    -- (it holds this row exclusively), then the claim must have applied
    -- the sets now stored.
    SELECT version INTO v_version FROM cluster_objects WHERE kind = 'rqs' LOCK IN SHARE MODE;
    IF v_version <> p_rules_version THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'WMS02';
    END IF;
    -- Up to p_count jobs of the task queue, each as a claim of its own would
    -- take it. A later job is taken only if all its debits still fit: the
    -- usage rows are this transaction's since the first job's debits, so the
    -- check holds until the commit. The first job's refusal is the caller's
    -- to hear; a later one only ends the batch.
    claiming: WHILE v_k < GREATEST(p_count, 1) DO
        IF v_k > 0 THEN
            SET v_i = 0;
            WHILE v_i < v_n DO
                SET v_used = NULL;
                SELECT used INTO v_used FROM resource_usage
                 WHERE scope = JSON_VALUE(p_debits, CONCAT('$[', v_i, '][0]'))
                   AND resource = JSON_VALUE(p_debits, CONCAT('$[', v_i, '][1]'));
                IF v_used IS NULL OR v_used + CAST(JSON_VALUE(p_debits, CONCAT('$[', v_i, '][2]')) AS DOUBLE)
                                     > CAST(JSON_VALUE(p_debits, CONCAT('$[', v_i, '][3]')) AS DOUBLE) THEN
                    LEAVE claiming;
                END IF;
                SET v_i = v_i + 1;
            END WHILE;
        END IF;
        SET v_job = NULL;
        SELECT job_id, cpu_time, attempt + 1 INTO v_job, v_cpu, v_attempt FROM jobs
         WHERE task_queue_id = p_tq_id AND status = 'Waiting'
         ORDER BY priority DESC, job_id LIMIT 1 FOR UPDATE SKIP LOCKED;
        IF v_job IS NULL THEN
            LEAVE claiming;
        END IF;
        SET v_minor = CONCAT(p_minor, ' (attempt ', v_attempt, ')');
        UPDATE jobs SET status = 'Matched', minor_status = v_minor, pilot_id = p_pilot, site = p_site,
               queue = p_queue, host = p_host, slots = p_slots, lease_expires = p_lease,
               matched_time = p_now, last_update_time = p_now, attempt = v_attempt
         WHERE job_id = v_job AND status = 'Waiting';
        SET v_i = 0;
        WHILE v_i < v_n DO
            SET v_scope = JSON_VALUE(p_debits, CONCAT('$[', v_i, '][0]'));
            SET v_resource = JSON_VALUE(p_debits, CONCAT('$[', v_i, '][1]'));
            SET v_amount = CAST(JSON_VALUE(p_debits, CONCAT('$[', v_i, '][2]')) AS DOUBLE);
            SET v_capacity = CAST(JSON_VALUE(p_debits, CONCAT('$[', v_i, '][3]')) AS DOUBLE);
            UPDATE resource_usage SET used = used + v_amount
             WHERE scope = v_scope AND resource = v_resource AND used + v_amount <= v_capacity;
            IF ROW_COUNT() = 0 THEN
                SET v_message = CONCAT('WMS01 ', v_i);
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
            END IF;
            INSERT INTO job_debits (job_id, scope, resource, amount) VALUES (v_job, v_scope, v_resource, v_amount);
            SET v_i = v_i + 1;
        END WHILE;
        INSERT INTO status_history (job_id, status, minor_status, source, time)
             VALUES (v_job, 'Matched', v_minor, p_source, p_now);
        SET v_jobs = JSON_ARRAY_APPEND(v_jobs, '$', v_job);
        SET v_k = v_k + 1;
    END WHILE claiming;
    -- The jobs in the order they were taken, each with what the caller needs.
    SELECT j.job_id, j.cpu_time, jj.jdl, j.attempt
      FROM JSON_TABLE(v_jobs, '$[*]' COLUMNS (n FOR ORDINALITY, id BIGINT PATH '$')) AS taken
      JOIN jobs AS j ON j.job_id = taken.id
      JOIN job_jdls AS jj ON jj.job_id = taken.id
     ORDER BY taken.n;
    -- The claim is its transaction's only statement: committing here saves
    -- the caller a round trip (wms/db/mariadb_connection.py).
    COMMIT;
END
"""


def _previous(name: str) -> str:
    """The routine of an earlier migration (the text to restore on downgrade):
    0009's function, 0012's procedure."""
    path = next(Path(__file__).parent.glob(f"{name}_*.py"))
    spec = importlib.util.spec_from_file_location(f"wms_migration_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CLAIM_FUNCTION if name == "0009" else module.CLAIM_PROCEDURE


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        op.execute(f"DROP FUNCTION IF EXISTS wms_claim_job({OLD_FUNCTION_ARGS})")
        op.execute(CLAIM_FUNCTION)
    elif dialect in ("mysql", "mariadb"):
        op.execute("DROP PROCEDURE IF EXISTS wms_claim_job")
        op.execute(CLAIM_PROCEDURE)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        op.execute(f"DROP FUNCTION IF EXISTS wms_claim_jobs({FUNCTION_ARGS})")
        op.execute(_previous("0009"))
    elif dialect in ("mysql", "mariadb"):
        op.execute("DROP PROCEDURE IF EXISTS wms_claim_jobs")
        op.execute(_previous("0012"))
