"""Advance reservations: reservations, their bookings and the grant's lock rows;
task queues name their reservation.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UTC_DATETIME = sa.DateTime(timezone=False).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
NAME = sa.String(255)
LONG_TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")
SCOPE = sa.String(600)


def upgrade() -> None:
    with op.batch_alter_table("task_queues") as batch:
        batch.add_column(sa.Column("reservation_id", sa.Integer(), nullable=True))
        batch.create_index("ix_task_queues_reservation_id", ["reservation_id"])
    op.create_table(
        "reservations",
        sa.Column("ar_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("owner", NAME, nullable=False),
        sa.Column("owner_group", NAME, nullable=False),
        sa.Column("vo", NAME, nullable=False),
        sa.Column("account", NAME, nullable=False),
        sa.Column("state", sa.String(1), nullable=False),
        sa.Column("submission_time", UTC_DATETIME, nullable=False),
        sa.Column("start_time", UTC_DATETIME, nullable=False),
        sa.Column("end_time", UTC_DATETIME, nullable=False),
        sa.Column("acl", LONG_TEXT, nullable=False),
        sa.Column("request", LONG_TEXT, nullable=False),
        sa.Column("granted", LONG_TEXT, nullable=False),
        sa.Column("mail_options", sa.String(8), nullable=False),
        sa.Column("mail_list", sa.String(1024), nullable=False),
        sa.Column("hard_error", sa.Boolean(), nullable=False),
        sa.Column("message", sa.String(1024), nullable=False),
        sa.Column("updated", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("ar_id", name="pk_reservations"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_reservations_state", "reservations", ["state"])
    op.create_table(
        "reservation_bookings",
        sa.Column("booking_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("ar_id", sa.Integer(), nullable=False),
        sa.Column("scope", SCOPE, nullable=False),
        sa.Column("resource", sa.String(64), nullable=False),
        sa.Column("amount", sa.Double(), nullable=False),
        sa.Column("queue", sa.String(767), nullable=False),
        sa.Column("host", NAME, nullable=False),
        sa.ForeignKeyConstraint(["ar_id"], ["reservations.ar_id"], name="fk_reservation_bookings_ar_id_reservations",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("booking_id", name="pk_reservation_bookings"),
    )
    op.create_index("ix_reservation_bookings_ar_id", "reservation_bookings", ["ar_id"])
    op.create_table(
        "reservation_locks",
        sa.Column("scope", SCOPE, nullable=False),
        sa.PrimaryKeyConstraint("scope", name="pk_reservation_locks"),
    )


def downgrade() -> None:
    op.drop_table("reservation_locks")
    # Dropping the table drops its index (MariaDB refuses to drop an index a foreign key needs).
    op.drop_table("reservation_bookings")
    op.drop_index("ix_reservations_state", table_name="reservations")
    op.drop_table("reservations")
    with op.batch_alter_table("task_queues") as batch:
        batch.drop_index("ix_task_queues_reservation_id")
        batch.drop_column("reservation_id")
