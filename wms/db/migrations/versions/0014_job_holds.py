"""Who holds a Held job.

Revision ID: 0014_job_holds
Revises: 0013_pilot_declarations
Create Date: 2026-12-01

``jobs.hold_types``: the holds on a job in the new state Held, Grid
Engine's hold types (qhold -h u|o|s) as their letters; None when nobody
holds it. The system holds the waiting jobs of a task queue whose
Requirements expression fails or runs over its evaluation budget at match
time (docs/security.md, "Evaluation cost").
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_job_holds"
down_revision: str | None = "0013_pilot_declarations"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("hold_types", sa.String(8), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("hold_types")
