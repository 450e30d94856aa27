"""Matching: job placement and lease columns, consumable usage, debits, job output.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UTC_DATETIME = sa.DateTime(timezone=False).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
LONG_TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
NAME = sa.String(255)
SCOPE = sa.String(600)


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("slots", sa.Integer(), nullable=False, server_default="1"))
        batch.add_column(sa.Column("pilot_id", NAME, nullable=True))
        batch.add_column(sa.Column("host", NAME, nullable=True))
        batch.add_column(sa.Column("lease_expires", UTC_DATETIME, nullable=True))
        batch.add_column(sa.Column("matched_time", UTC_DATETIME, nullable=True))
        batch.add_column(sa.Column("start_time", UTC_DATETIME, nullable=True))
        batch.add_column(sa.Column("end_time", UTC_DATETIME, nullable=True))
        batch.add_column(sa.Column("heartbeat_time", UTC_DATETIME, nullable=True))
        batch.add_column(sa.Column("exit_code", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("reschedule_count", sa.Integer(), nullable=False, server_default="0"))
        # Create the claim index before dropping the old one: MariaDB needs an
        # index starting with task_queue_id for the foreign key at all times.
        batch.create_index("ix_jobs_claim", ["task_queue_id", "status", sa.text("priority DESC"), "job_id"])
        batch.drop_index("ix_jobs_task_queue_id_status")
        batch.create_index("ix_jobs_status_lease", ["status", "lease_expires"])

    op.create_table(
        "resource_usage",
        sa.Column("scope", SCOPE, nullable=False),
        sa.Column("resource", sa.String(64), nullable=False),
        sa.Column("used", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("scope", "resource", name="pk_resource_usage"),
    )
    op.create_table(
        "job_debits",
        sa.Column("job_id", BIG_ID, nullable=False),
        sa.Column("scope", SCOPE, nullable=False),
        sa.Column("resource", sa.String(64), nullable=False),
        sa.Column("amount", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.job_id"], name="fk_job_debits_job_id_jobs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "scope", "resource", name="pk_job_debits"),
    )
    op.create_table(
        "job_outputs",
        sa.Column("job_id", BIG_ID, nullable=False),
        sa.Column("stdout", LONG_TEXT, nullable=False),
        sa.Column("stderr", LONG_TEXT, nullable=False),
        sa.Column("truncated", sa.Boolean(), nullable=False),
        sa.Column("updated", UTC_DATETIME, nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.job_id"], name="fk_job_outputs_job_id_jobs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", name="pk_job_outputs"),
    )


def downgrade() -> None:
    op.drop_table("job_outputs")
    op.drop_table("job_debits")
    op.drop_table("resource_usage")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_status_lease")
        batch.create_index("ix_jobs_task_queue_id_status", ["task_queue_id", "status"])
        batch.drop_index("ix_jobs_claim")
        for column in ("reschedule_count", "exit_code", "heartbeat_time", "end_time", "start_time", "matched_time",
                       "lease_expires", "host", "pilot_id", "slots"):
            batch.drop_column(column)
