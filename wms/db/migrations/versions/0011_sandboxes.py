"""Input and output sandboxes.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25

``sandbox_uploads``: which user uploaded which content (by SHA-256);
``sandbox_files``: the files of each job's input and output sandboxes;
``sandbox_chunks``: the content itself when wms.yaml says
``sandboxes: {store: database}``, in pieces that fit MariaDB's
max_allowed_packet (docs/architecture.md, "Sandboxes").
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UTC_DATETIME = sa.DateTime(timezone=False).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
NAME = sa.String(255)
DIGEST = sa.String(64)
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
BYTES = sa.LargeBinary().with_variant(mysql.LONGBLOB(), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "sandbox_uploads",
        sa.Column("owner", NAME, nullable=False),
        sa.Column("sha256", DIGEST, nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("uploaded", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("owner", "sha256", name="pk_sandbox_uploads"),
    )
    op.create_index("ix_sandbox_uploads_sha256", "sandbox_uploads", ["sha256"])
    op.create_table(
        "sandbox_files",
        sa.Column("job_id", BIG_ID, nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("sha256", DIGEST, nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("created", UTC_DATETIME, nullable=False),
        sa.Column("attempt", sa.Integer(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.job_id"], name="fk_sandbox_files_job_id_jobs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "kind", "name", name="pk_sandbox_files"),
    )
    op.create_index("ix_sandbox_files_sha256", "sandbox_files", ["sha256"])
    op.create_table(
        "sandbox_chunks",
        sa.Column("sha256", DIGEST, nullable=False),
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("data", BYTES, nullable=False),
        sa.Column("stored", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("sha256", "seq", name="pk_sandbox_chunks"),
    )


def downgrade() -> None:
    op.drop_table("sandbox_chunks")
    op.drop_index("ix_sandbox_files_sha256", table_name="sandbox_files")
    op.drop_table("sandbox_files")
    op.drop_index("ix_sandbox_uploads_sha256", table_name="sandbox_uploads")
    op.drop_table("sandbox_uploads")
