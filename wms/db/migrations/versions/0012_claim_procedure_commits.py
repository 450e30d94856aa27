"""The MariaDB claim procedure commits its own transaction.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27

Until now the caller committed the claim: a CALL, then a COMMIT, each a
round trip through the pure-Python driver. The procedure now ends with
COMMIT, after the SELECT that returns the job, and the connection
(wms/db/mariadb_connection.py) then knows there is nothing left for the
caller's COMMIT to do. A claim refused part-way (a debit that does not
fit, quota sets that changed) still signals before the COMMIT, and the
caller's ROLLBACK undoes what it had done. The claim must therefore be
the only statement of its transaction, which it always is
(wms/services/matcher.py). PostgreSQL's function is unchanged: it runs
on an autocommit connection and is already its own transaction.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A frozen copy of wms/db/sql/claim_mariadb.sql as of this revision.
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
    -- The claim is its transaction's only statement: committing here saves
    -- the caller a round trip (wms/db/mariadb_connection.py).
    COMMIT;
END
"""


def _previous() -> str:
    """The procedure of migration 0009 (the text to restore on downgrade)."""
    path = next(Path(__file__).parent.glob("0009_*.py"))
    spec = importlib.util.spec_from_file_location("wms_migration_0009", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CLAIM_PROCEDURE


def upgrade() -> None:
    if op.get_bind().dialect.name in ("mysql", "mariadb"):
        op.execute("DROP PROCEDURE IF EXISTS wms_claim_job")
        op.execute(CLAIM_PROCEDURE)


def downgrade() -> None:
    if op.get_bind().dialect.name in ("mysql", "mariadb"):
        op.execute("DROP PROCEDURE IF EXISTS wms_claim_job")
        op.execute(_previous())
