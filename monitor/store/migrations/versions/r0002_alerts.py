"""Alert state: the alerts the monitor raised, so a restart neither loses nor repeats a page.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "alerts",
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("annotations", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("active_at", sa.Double(), nullable=False),
        sa.Column("fired_at", sa.Double(), nullable=True),
        sa.Column("resolved_at", sa.Double(), nullable=True),
        sa.Column("last_sent_at", sa.Double(), nullable=True),
        sa.Column("value", sa.Double(), nullable=True),
        sa.CheckConstraint("state IN ('pending', 'firing', 'resolved')",
                           name=op.f("ck_alerts_state")),
        sa.PrimaryKeyConstraint("fingerprint", name=op.f("pk_alerts")),
    )


def downgrade() -> None:
    op.drop_table("alerts")
