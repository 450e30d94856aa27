"""The Matcher's claim as one MariaDB procedure call.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-22

As ``wms_claim_job`` on PostgreSQL (migration 0006): the claim, its
conditional debits, the debit records and the history entry in one call
instead of a statement each, which on MariaDB (and its pure-Python
driver) is most of a claim's cost (docs/benchmarks.md). The caller's
transaction commits it, or rolls it back when a debit does not fit:
MariaDB does not undo a procedure's earlier statements by itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# p_debits: a JSON array of [scope, resource, amount, capacity], sorted by key.
# A debit that does not fit signals SQLSTATE 45000 with "WMS01 <0-based index>".
CLAIM_PROCEDURE = """
CREATE PROCEDURE wms_claim_job(
    IN p_tq_id INT, IN p_pilot VARCHAR(255), IN p_site VARCHAR(255), IN p_queue VARCHAR(767),
    IN p_host VARCHAR(255), IN p_slots INT, IN p_lease DATETIME(6), IN p_minor VARCHAR(512),
    IN p_now DATETIME(6), IN p_source VARCHAR(128), IN p_debits LONGTEXT)
BEGIN
    DECLARE v_job BIGINT DEFAULT NULL;
    DECLARE v_cpu INT DEFAULT NULL;
    DECLARE v_i INT DEFAULT 0;
    DECLARE v_n INT DEFAULT JSON_LENGTH(p_debits);
    DECLARE v_scope VARCHAR(767);
    DECLARE v_resource VARCHAR(64);
    DECLARE v_amount DOUBLE;
    DECLARE v_capacity DOUBLE;
    DECLARE v_message VARCHAR(64);
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_job = NULL;
    SELECT job_id, cpu_time INTO v_job, v_cpu FROM jobs
     WHERE task_queue_id = p_tq_id AND status = 'Waiting'
     ORDER BY priority DESC, job_id LIMIT 1 FOR UPDATE SKIP LOCKED;
    IF v_job IS NOT NULL THEN
        UPDATE jobs SET status = 'Matched', minor_status = p_minor, pilot_id = p_pilot, site = p_site,
               queue = p_queue, host = p_host, slots = p_slots, lease_expires = p_lease,
               matched_time = p_now, last_update_time = p_now
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
             VALUES (v_job, 'Matched', p_minor, p_source, p_now);
    END IF;
    SELECT v_job AS job_id, v_cpu AS cpu_time, jdl FROM job_jdls WHERE job_id = v_job;
END
"""


def upgrade() -> None:
    if op.get_bind().dialect.name in ("mysql", "mariadb"):
        op.execute("DROP PROCEDURE IF EXISTS wms_claim_job")
        op.execute(CLAIM_PROCEDURE)


def downgrade() -> None:
    if op.get_bind().dialect.name in ("mysql", "mariadb"):
        op.execute("DROP PROCEDURE IF EXISTS wms_claim_job")
