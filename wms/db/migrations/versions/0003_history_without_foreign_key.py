"""The status history drops its foreign key to jobs (bulk submission speed).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("status_history") as batch:
        batch.drop_constraint("fk_status_history_job_id_jobs", type_="foreignkey")


def downgrade() -> None:
    with op.batch_alter_table("status_history") as batch:
        batch.create_foreign_key("fk_status_history_job_id_jobs", "jobs", ["job_id"], ["job_id"], ondelete="CASCADE")
