"""Pilot records of the SiteDirector and its per-queue lock rows.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UTC_DATETIME = sa.DateTime(timezone=False).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
NAME = sa.String(255)


def upgrade() -> None:
    op.create_table(
        "pilots",
        sa.Column("pilot_id", NAME, nullable=False),
        sa.Column("site", sa.String(128), nullable=False),
        sa.Column("ce", NAME, nullable=False),
        sa.Column("queue", sa.String(128), nullable=False),
        sa.Column("backend", sa.String(32), nullable=False),
        sa.Column("backend_ref", NAME, nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("jobs_run", sa.Integer(), nullable=False),
        sa.Column("submitted", UTC_DATETIME, nullable=False),
        sa.Column("last_update", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("pilot_id", name="pk_pilots"),
    )
    op.create_index("ix_pilots_site_ce_queue_state", "pilots", ["site", "ce", "queue", "state"])
    op.create_index("ix_pilots_state", "pilots", ["state"])
    op.create_table(
        "pilot_director_queues",
        sa.Column("site", sa.String(128), nullable=False),
        sa.Column("ce", NAME, nullable=False),
        sa.Column("queue", sa.String(128), nullable=False),
        sa.Column("last_submission", UTC_DATETIME, nullable=True),
        sa.PrimaryKeyConstraint("site", "ce", "queue", name="pk_pilot_director_queues"),
    )


def downgrade() -> None:
    op.drop_table("pilot_director_queues")
    op.drop_index("ix_pilots_state", table_name="pilots")
    op.drop_index("ix_pilots_site_ce_queue_state", table_name="pilots")
    op.drop_table("pilots")
