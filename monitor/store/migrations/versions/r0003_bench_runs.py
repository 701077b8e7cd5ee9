"""Load-generation runs, sweeps and canary comparisons with their results.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "bench_runs",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("artifacts", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint("kind IN ('run', 'sweep', 'canary')",
                           name=op.f("ck_bench_runs_kind")),
        sa.CheckConstraint("status IN ('running', 'done', 'failed')",
                           name=op.f("ck_bench_runs_status")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bench_runs")),
    )
    op.create_index(op.f("ix_bench_runs_kind"), "bench_runs", ["kind"])
    op.create_index(op.f("ix_bench_runs_started_at"), "bench_runs", ["started_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_bench_runs_started_at"), table_name="bench_runs")
    op.drop_index(op.f("ix_bench_runs_kind"), table_name="bench_runs")
    op.drop_table("bench_runs")
