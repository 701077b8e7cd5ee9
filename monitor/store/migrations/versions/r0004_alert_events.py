"""Alert history: every change of an alert's state (pending, firing, resolved, dropped).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "alert_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("alertname", sa.String(200), nullable=False),
        sa.Column("slo", sa.String(200), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("previous_state", sa.String(16), nullable=True),
        sa.Column("fired_at", sa.Double(), nullable=True),
        sa.Column("value", sa.Double(), nullable=True),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("annotations", sa.JSON(), nullable=False),
        sa.CheckConstraint("state IN ('pending', 'firing', 'resolved', 'inactive')",
                           name=op.f("ck_alert_events_state")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_events")),
    )
    op.create_index(op.f("ix_alert_events_at"), "alert_events", ["at"])
    op.create_index(op.f("ix_alert_events_alertname"), "alert_events", ["alertname"])
    op.create_index(op.f("ix_alert_events_slo"), "alert_events", ["slo"])


def downgrade() -> None:
    op.drop_index(op.f("ix_alert_events_slo"), table_name="alert_events")
    op.drop_index(op.f("ix_alert_events_alertname"), table_name="alert_events")
    op.drop_index(op.f("ix_alert_events_at"), table_name="alert_events")
    op.drop_table("alert_events")
