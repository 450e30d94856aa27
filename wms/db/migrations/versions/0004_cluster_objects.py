"""Grid Engine objects changed at run time with qconf (the complex table).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UTC_DATETIME = sa.DateTime(timezone=False).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
LONG_TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "cluster_objects",
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("text", LONG_TEXT, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated", UTC_DATETIME, nullable=False),
        sa.Column("updated_by", sa.String(255), nullable=False),
        sa.PrimaryKeyConstraint("kind", name="pk_cluster_objects"),
    )


def downgrade() -> None:
    op.drop_table("cluster_objects")
