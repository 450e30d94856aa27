"""The initial schema: jobs, JDLs, status history, submit pools, task queues, tokens.

Revision ID: 0001
Revises:
Create Date: 2025-01-01

Written by hand to match wms/db/schema.py exactly (tests/db/test_migrations.py
checks it on SQLite, PostgreSQL and MariaDB). Types are spelled out here
rather than imported, so that later schema changes cannot alter history.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Naive UTC timestamps; microseconds on MariaDB too.
UTC_DATETIME = sa.DateTime(timezone=False).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
LONG_TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
NAME = sa.String(255)
KEY = sa.String(64)


def upgrade() -> None:
    op.create_table(
        "task_queues",
        sa.Column("tq_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tq_key", KEY, nullable=False),
        sa.Column("owner", NAME, nullable=False),
        sa.Column("owner_group", NAME, nullable=False),
        sa.Column("vo", NAME, nullable=False),
        sa.Column("submit_pool", KEY, nullable=True),
        sa.Column("cpu_time", sa.Integer(), nullable=False),
        sa.Column("definition", LONG_TEXT, nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("created", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("tq_id", name="pk_task_queues"),
        sa.UniqueConstraint("tq_key", name="uq_task_queues_tq_key"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_task_queues_submit_pool", "task_queues", ["submit_pool"])

    op.create_table(
        "jobs",
        sa.Column("job_id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("job_name", NAME, nullable=False),
        sa.Column("owner", NAME, nullable=False),
        sa.Column("owner_group", NAME, nullable=False),
        sa.Column("vo", NAME, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("minor_status", sa.String(512), nullable=False),
        sa.Column("site", NAME, nullable=False),
        sa.Column("queue", sa.String(767), nullable=False),
        sa.Column("submit_pool", KEY, nullable=True),
        sa.Column("task_queue_id", sa.Integer(), nullable=True),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("cpu_time", sa.Integer(), nullable=False),
        sa.Column("submission_time", UTC_DATETIME, nullable=False),
        sa.Column("last_update_time", UTC_DATETIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["task_queue_id"], ["task_queues.tq_id"], name="fk_jobs_task_queue_id_task_queues"
        ),
        sa.PrimaryKeyConstraint("job_id", name="pk_jobs"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_jobs_owner_status", "jobs", ["owner", "status"])
    op.create_index("ix_jobs_status", "jobs", ["status"])
    op.create_index("ix_jobs_task_queue_id_status", "jobs", ["task_queue_id", "status"])
    op.create_index("ix_jobs_submit_pool", "jobs", ["submit_pool", "status"])

    op.create_table(
        "job_jdls",
        sa.Column("job_id", BIG_ID, nullable=False),
        sa.Column("original_jdl", LONG_TEXT, nullable=False),
        sa.Column("jdl", LONG_TEXT, nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.job_id"], name="fk_job_jdls_job_id_jobs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", name="pk_job_jdls"),
    )

    op.create_table(
        "status_history",
        sa.Column("entry_id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("job_id", BIG_ID, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("minor_status", sa.String(512), nullable=False),
        sa.Column("source", sa.String(128), nullable=False),
        sa.Column("time", UTC_DATETIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.job_id"], name="fk_status_history_job_id_jobs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("entry_id", name="pk_status_history"),
    )
    op.create_index("ix_status_history_job_id", "status_history", ["job_id", "entry_id"])

    op.create_table(
        "submit_pools",
        sa.Column("pool_id", KEY, nullable=False),
        sa.Column("requirements", LONG_TEXT, nullable=False),
        sa.Column("vo", NAME, nullable=False),
        sa.Column("created", UTC_DATETIME, nullable=False),
        sa.Column("last_update", UTC_DATETIME, nullable=False),
        sa.Column("last_used", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("pool_id", name="pk_submit_pools"),
    )

    op.create_table(
        "pool_queues",
        sa.Column("pool_id", KEY, nullable=False),
        sa.Column("site", sa.String(128), nullable=False),
        sa.Column("ce", NAME, nullable=False),
        sa.Column("queue", sa.String(128), nullable=False),
        sa.Column("updated", UTC_DATETIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["pool_id"],
            ["submit_pools.pool_id"],
            name="fk_pool_queues_pool_id_submit_pools",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pool_id", "site", "ce", "queue", name="pk_pool_queues"),
    )
    op.create_index(
        "ix_pool_queues_site_ce_queue", "pool_queues", ["site", "ce", "queue", "pool_id"]
    )

    op.create_table(
        "tokens",
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("user", NAME, nullable=False),
        sa.Column("user_group", NAME, nullable=False),
        sa.Column("vo", NAME, nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("description", sa.String(255), nullable=False),
        sa.Column("created", UTC_DATETIME, nullable=False),
        sa.Column("expires", UTC_DATETIME, nullable=True),
        sa.PrimaryKeyConstraint("token_hash", name="pk_tokens"),
    )


def downgrade() -> None:
    # Indexes go with their tables (MariaDB refuses to drop one a foreign key needs).
    for table in ("tokens", "pool_queues", "submit_pools", "status_history", "job_jdls", "jobs", "task_queues"):
        op.drop_table(table)
