-- wms_claim_jobs: MariaDB procedure
-- The current text of the claim on MariaDB. Migrations install frozen copies of it
-- (the latest: 0018); tests/db/test_claim_routines.py checks that the installed
-- routine is this text. A change here needs a migration that installs it.
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
