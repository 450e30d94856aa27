"""The claim checks the version of the resource quota sets it applied, and
numbers each hand-out of a job (fencing).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24

A change of the resource quota sets recounts, in the same transaction,
what every Matched and Running job holds of the new rule instances
(docs/quotas.md). A Matcher process adopts the new sets up to a second
later, so a claim made with the old ones could slip in after the recount
and hold nothing of a limit now in force. The claim therefore names the
version of the sets it applied and is refused (SQLSTATE WMS02) when the
stored version differs; the Matcher then adopts the new sets and tries
again. The claim waits for a recount in progress through the usage guard:
on PostgreSQL the table lock ``resource_usage`` ROW EXCLUSIVE (the recount
takes EXCLUSIVE), on MariaDB a shared lock on the ``rqs`` row of
``cluster_objects`` (the recount takes it exclusively). That row now
always exists (version 0: the sets of config/rqs/ apply).

Each claim of a job is an attempt with its own number (``jobs.attempt``,
counted up by the claim, shown in the Matched history entry as "Assigned
to pilot P (attempt N)"). The pilot quotes it in every report, heartbeat
and output upload of the job, which are refused once the job has been
handed out again: a late or revived pilot cannot overwrite the current
attempt (docs/architecture.md).

The function (PostgreSQL) and the procedure (MariaDB) below replace those
of migrations 0006 and 0008; SQLite's statement form is in
wms/db/matching.py.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from alembic import op
import sqlalchemy as sa

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_FUNCTION_ARGS = ("integer, text, text, text, text, integer, timestamp, text, timestamp, text, "
                     "text[], text[], double precision[], double precision[]")

CLAIM_FUNCTION = """
CREATE FUNCTION wms_claim_job(
    p_tq_id integer, p_pilot text, p_site text, p_queue text, p_host text, p_slots integer,
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
    IF v_job IS NULL THEN
        RETURN;
    END IF;
    -- Debits in the caller's (sorted) order, so claimers lock usage rows
    -- in one order; one that does not fit aborts the whole claim, naming its
    -- 0-based index as MariaDB's procedure does.
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
END
$fn$
"""

# p_debits: a JSON array of [scope, resource, amount, capacity], sorted by key.
# A debit that does not fit signals SQLSTATE 45000 with "WMS01 <0-based index>";
# sets changed since the caller read them, "WMS02".
CLAIM_PROCEDURE = """
CREATE PROCEDURE wms_claim_job(
    IN p_tq_id INT, IN p_pilot VARCHAR(255), IN p_site VARCHAR(255), IN p_queue VARCHAR(767),
    IN p_host VARCHAR(255), IN p_slots INT, IN p_lease DATETIME(6), IN p_minor VARCHAR(512),
    IN p_now DATETIME(6), IN p_source VARCHAR(128), IN p_debits LONGTEXT, IN p_rules_version INT)
BEGIN
    DECLARE v_job BIGINT DEFAULT NULL;
    DECLARE v_cpu INT DEFAULT NULL;
    DECLARE v_version INT DEFAULT 0;
    DECLARE v_attempt INT DEFAULT NULL;
    DECLARE v_minor VARCHAR(512);
    DECLARE v_i INT DEFAULT 0;
    DECLARE v_n INT DEFAULT JSON_LENGTH(p_debits);
    DECLARE v_scope VARCHAR(767);
    DECLARE v_resource VARCHAR(64);
    DECLARE v_amount DOUBLE;
    DECLARE v_capacity DOUBLE;
    DECLARE v_message VARCHAR(64);
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_job = NULL;
    -- The usage guard: waits for a recount of the quota sets in progress
    -- (it holds this row exclusively), then the claim must have applied
    -- the sets now stored.
    SELECT version INTO v_version FROM cluster_objects WHERE kind = 'rqs' LOCK IN SHARE MODE;
    IF v_version <> p_rules_version THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'WMS02';
    END IF;
    SELECT job_id, cpu_time, attempt + 1 INTO v_job, v_cpu, v_attempt FROM jobs
     WHERE task_queue_id = p_tq_id AND status = 'Waiting'
     ORDER BY priority DESC, job_id LIMIT 1 FOR UPDATE SKIP LOCKED;
    IF v_job IS NOT NULL THEN
        SET v_minor = CONCAT(p_minor, ' (attempt ', v_attempt, ')');
        UPDATE jobs SET status = 'Matched', minor_status = v_minor, pilot_id = p_pilot, site = p_site,
               queue = p_queue, host = p_host, slots = p_slots, lease_expires = p_lease,
               matched_time = p_now, last_update_time = p_now, attempt = v_attempt
         WHERE job_id = v_job AND status = 'Waiting';
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
    END IF;
    SELECT v_job AS job_id, v_cpu AS cpu_time, jdl, v_attempt AS attempt FROM job_jdls WHERE job_id = v_job;
END
"""


def _previous(name: str) -> str:
    """A constant of an earlier migration (the text to restore on downgrade)."""
    path = next(Path(__file__).parent.glob(f"{name}_*.py"))
    spec = importlib.util.spec_from_file_location(f"wms_migration_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CLAIM_FUNCTION if name == "0006" else module.CLAIM_PROCEDURE


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("attempt", sa.Integer(), nullable=False, server_default="0"))
    bind = op.get_bind()
    objects = sa.table("cluster_objects", sa.column("kind"), sa.column("text"), sa.column("version"),
                       sa.column("updated"), sa.column("updated_by"))
    if bind.execute(sa.select(objects.c.kind).where(objects.c.kind == "rqs")).first() is None:
        op.execute(objects.insert().values(kind="rqs", text="", version=0,
                                           updated=datetime.now(timezone.utc).replace(tzinfo=None),
                                           updated_by="wms"))
    if bind.dialect.name == "postgresql":
        op.execute(f"DROP FUNCTION IF EXISTS wms_claim_job({OLD_FUNCTION_ARGS})")
        op.execute(CLAIM_FUNCTION)
    elif bind.dialect.name in ("mysql", "mariadb"):
        op.execute("DROP PROCEDURE IF EXISTS wms_claim_job")
        op.execute(CLAIM_PROCEDURE)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute(f"DROP FUNCTION IF EXISTS wms_claim_job({OLD_FUNCTION_ARGS}, integer)")
        op.execute(_previous("0006"))
    elif bind.dialect.name in ("mysql", "mariadb"):
        op.execute("DROP PROCEDURE IF EXISTS wms_claim_job")
        op.execute(_previous("0008"))
    op.execute("DELETE FROM cluster_objects WHERE kind = 'rqs' AND version = 0")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("attempt")
