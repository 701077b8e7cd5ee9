"""Request events: one row per request the gateway judged, for exact percentiles and goodput.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None

_SECONDS = ("ttft_seconds", "first_content_seconds", "tpot_seconds", "max_itl_seconds",
            "e2e_seconds")
_TARGETS = ("target_ttft_seconds", "target_itl_seconds", "engine_queue_seconds",
            "engine_ttft_seconds")


def upgrade() -> None:
    op.create_table(
        "request_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("slo_class", sa.String(64), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("good", sa.Boolean(), nullable=False),
        *(sa.Column(name, sa.Double(), nullable=True) for name in _SECONDS),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        *(sa.Column(name, sa.Double(), nullable=True) for name in _TARGETS),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_request_events")),
    )
    op.create_index(op.f("ix_request_events_at"), "request_events", ["at"])
    op.create_index(op.f("ix_request_events_tenant"), "request_events", ["tenant"])


def downgrade() -> None:
    op.drop_index(op.f("ix_request_events_tenant"), table_name="request_events")
    op.drop_index(op.f("ix_request_events_at"), table_name="request_events")
    op.drop_table("request_events")
