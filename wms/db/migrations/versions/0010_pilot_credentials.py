"""Tokens bound to a pilot, revocable; pilots of a VO.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25

``tokens.pilot_id``: the pilot a pilot-role token speaks for (set when the
SiteDirector issues it, or on the first job request of a hand-made pilot
token); ``tokens.revoked``: when `wms admin token revoke` ended it (the
row is kept, so the refusal can say why). ``pilots.vo``: the VO whose
token the pilot carries and whose jobs it runs (docs/security.md,
"Pilots and tokens").
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UTC_DATETIME = sa.DateTime(timezone=False).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
NAME = sa.String(255)


def upgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.add_column(sa.Column("pilot_id", NAME, nullable=True))
        batch.add_column(sa.Column("revoked", UTC_DATETIME, nullable=True))
    op.create_index("ix_tokens_pilot_id", "tokens", ["pilot_id"])
    with op.batch_alter_table("pilots") as batch:
        batch.add_column(sa.Column("vo", NAME, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pilots") as batch:
        batch.drop_column("vo")
    op.drop_index("ix_tokens_pilot_id", table_name="tokens")
    with op.batch_alter_table("tokens") as batch:
        batch.drop_column("revoked")
        batch.drop_column("pilot_id")
