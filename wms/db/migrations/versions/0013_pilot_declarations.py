"""What a pilot declares of itself: its slots and how it isolates payloads.

Revision ID: 0013_pilot_declarations
Revises: 0012
Create Date: 2026-11-28

``tokens.slots``: the slots the token's pilot declared (or the
SiteDirector gave it): its token never holds more at once, and a later
declaration may only lower it. ``tokens.isolation`` and
``tokens.isolation_note``: how the pilot runs payloads (``bubblewrap``,
``apptainer``, ``none``) and why, as it last said; ``pilots.isolation``
and ``pilots.isolation_note`` the same for a SiteDirector pilot, for `wms
pilots` (docs/security.md, "Pilots and tokens").
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_pilot_declarations"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ISOLATION = sa.String(16)
NOTE = sa.String(255)


def upgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.add_column(sa.Column("slots", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("isolation", ISOLATION, nullable=True))
        batch.add_column(sa.Column("isolation_note", NOTE, nullable=True))
    with op.batch_alter_table("pilots") as batch:
        batch.add_column(sa.Column("isolation", ISOLATION, nullable=True))
        batch.add_column(sa.Column("isolation_note", NOTE, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pilots") as batch:
        batch.drop_column("isolation_note")
        batch.drop_column("isolation")
    with op.batch_alter_table("tokens") as batch:
        batch.drop_column("isolation_note")
        batch.drop_column("isolation")
        batch.drop_column("slots")
