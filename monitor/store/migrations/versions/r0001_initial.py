"""Initial schema: targets, series, histogram bounds, intervals, values, rollup watermarks.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

_VALUE_KEY = ("target_id", "resolution", "series_id", "end_time")


def _value_key_columns() -> list[sa.Column[Any]]:
    return [
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("resolution", sa.Integer(), nullable=False),
        sa.Column("series_id", sa.Integer(), nullable=False),
        sa.Column("end_time", sa.Double(), nullable=False),
    ]


def _value_key_constraints(table: str) -> list[sa.Constraint]:
    return [
        sa.ForeignKeyConstraint(["target_id"], ["targets.id"],
                                name=f"fk_{table}_target_id_targets"),
        sa.ForeignKeyConstraint(["series_id"], ["series.id"],
                                name=f"fk_{table}_series_id_series"),
        sa.PrimaryKeyConstraint(*_VALUE_KEY, name=f"pk_{table}"),
    ]


def upgrade() -> None:
    op.create_table(
        "targets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("engine", sa.String(64), nullable=True),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_targets"),
        sa.UniqueConstraint("name", name="uq_targets_name"),
    )
    op.create_table(
        "series",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.CheckConstraint("kind IN ('counter', 'gauge', 'histogram')", name="ck_series_kind"),
        sa.PrimaryKeyConstraint("id", name="pk_series"),
        sa.UniqueConstraint("key", name="uq_series_key"),
    )
    op.create_index("ix_series_name", "series", ["name"])
    op.create_table(
        "histogram_bounds",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("bounds", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_histogram_bounds"),
        sa.UniqueConstraint("digest", name="uq_histogram_bounds_digest"),
    )
    op.create_table(
        "intervals",
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("resolution", sa.Integer(), nullable=False),
        sa.Column("end_time", sa.Double(), nullable=False),
        sa.Column("start_time", sa.Double(), nullable=False),
        sa.Column("state", sa.String(8), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint("state IN ('up', 'first', 'down')", name="ck_intervals_state"),
        sa.ForeignKeyConstraint(["target_id"], ["targets.id"],
                                name="fk_intervals_target_id_targets"),
        sa.PrimaryKeyConstraint("target_id", "resolution", "end_time", name="pk_intervals"),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "counter_values",
        *_value_key_columns(),
        sa.Column("increase", sa.Double(), nullable=True),
        *_value_key_constraints("counter_values"),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "gauge_values",
        *_value_key_columns(),
        sa.Column("last", sa.Double(), nullable=True),
        sa.Column("total", sa.Double(), nullable=True),
        sa.Column("num_readings", sa.Integer(), nullable=False),
        sa.Column("minimum", sa.Double(), nullable=True),
        sa.Column("maximum", sa.Double(), nullable=True),
        *_value_key_constraints("gauge_values"),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "histogram_values",
        *_value_key_columns(),
        sa.Column("bounds_id", sa.Integer(), nullable=False),
        sa.Column("sum", sa.Double(), nullable=True),
        sa.Column("count", sa.Double(), nullable=True),
        sa.Column("first_bucket", sa.Integer(), nullable=False),
        sa.Column("counts", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["bounds_id"], ["histogram_bounds.id"],
                                name="fk_histogram_values_bounds_id_histogram_bounds"),
        *_value_key_constraints("histogram_values"),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "rollup_watermarks",
        sa.Column("resolution", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("watermark", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("resolution", name="pk_rollup_watermarks"),
    )


def downgrade() -> None:
    for table in ("rollup_watermarks", "histogram_values", "gauge_values", "counter_values",
                  "intervals", "histogram_bounds", "series", "targets"):
        op.drop_table(table)
