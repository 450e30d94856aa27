"""Who holds a Held job, and why.

Revision ID: 0016_job_hold_reasons
Revises: 0015_job_caps
Create Date: 2026-11-28

``job_holds``: one row per hold on a job (Grid Engine's hold types, qhold
-h u|o|s): who set it, the reason given and when, for the job controls
(``wms hold``, ``wms release``, qhold, qrls) and ``wms why``. The system
holds already stored get their row, with the minor status they carry as
the reason.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

UTC_DATETIME = sa.DateTime(timezone=False).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

revision: str = "0016_job_hold_reasons"
down_revision: str | None = "0015_job_caps"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_holds",
        sa.Column("job_id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), nullable=False),
        sa.Column("hold_type", sa.String(1), nullable=False),
        sa.Column("holder", sa.String(255), nullable=False),
        sa.Column("reason", sa.String(512), nullable=False),
        sa.Column("time", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("job_id", "hold_type", name="pk_job_holds"),
    )
    op.execute(
        "INSERT INTO job_holds (job_id, hold_type, holder, reason, time) "
        "SELECT job_id, 's', 'system', "
        # "Held by the system: " (20 characters) is said by the minor status, not the reason
        "CASE WHEN minor_status LIKE 'Held by the system: %' THEN SUBSTR(minor_status, 21) ELSE minor_status END, "
        "last_update_time FROM jobs "
        "WHERE status = 'Held' AND hold_types LIKE '%s%'"
    )


def downgrade() -> None:
    op.drop_table("job_holds")
