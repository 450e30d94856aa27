"""Caps on a user's and a VO's jobs.

Revision ID: 0015_job_caps
Revises: 0014_job_holds
Create Date: 2026-11-29

``submission_locks``: one row per user and per VO whose submissions are
checked against wms.yaml ``caps``; a submission holds its rows until it
commits, so two submissions of one user never both pass the cap
(docs/security.md, "Caps"). ``ix_jobs_vo_status``: a VO's jobs counted by
state without reading the table.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_job_caps"
down_revision: str | None = "0014_job_holds"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "submission_locks",
        sa.Column("scope", sa.String(300), nullable=False),
        sa.PrimaryKeyConstraint("scope", name="pk_submission_locks"),
    )
    op.create_index("ix_jobs_vo_status", "jobs", ["vo", "status"])


def downgrade() -> None:
    op.drop_index("ix_jobs_vo_status", table_name="jobs")
    op.drop_table("submission_locks")
