"""Initial store schema: targets, scrapes, series, layouts, samples, histogram snapshots,
exemplars.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "targets",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("dialect", sa.String(64), nullable=False),
    )
    op.create_table(
        "scrapes",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("target_id", sa.Integer(), sa.ForeignKey("targets.id"), nullable=False),
        sa.Column("timestamp_seconds", sa.Float(), nullable=False),
        sa.Column("duration_seconds", sa.Float(), nullable=True),
        sa.Column("is_up", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.UniqueConstraint("target_id", "timestamp_seconds"),
    )
    op.create_table(
        "series",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("target_id", sa.Integer(), sa.ForeignKey("targets.id"), nullable=False),
        sa.Column("family", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("labels_json", sa.Text(), nullable=False),
        sa.Column("labels_hash", sa.String(64), nullable=False),
        sa.Column("flags", sa.String(255), nullable=False),
        sa.Column("source", sa.String(255), nullable=False),
        sa.UniqueConstraint("family", "labels_hash", "flags"),
    )
    op.create_index("ix_series_target_id", "series", ["target_id"])
    op.create_index("ix_series_family", "series", ["family"])
    op.create_table(
        "layouts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("bounds_json", sa.Text(), nullable=False),
        sa.Column("bounds_hash", sa.String(64), nullable=False, unique=True),
    )
    op.create_table(
        "samples",
        sa.Column("series_id", sa.Integer(), sa.ForeignKey("series.id"), primary_key=True),
        sa.Column("scrape_id", sa.Integer(), sa.ForeignKey("scrapes.id"), primary_key=True),
        sa.Column("timestamp_seconds", sa.Float(), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
    )
    op.create_index("ix_samples_series_time", "samples", ["series_id", "timestamp_seconds"])
    op.create_table(
        "histogram_snapshots",
        sa.Column("series_id", sa.Integer(), sa.ForeignKey("series.id"), primary_key=True),
        sa.Column("scrape_id", sa.Integer(), sa.ForeignKey("scrapes.id"), primary_key=True),
        sa.Column("timestamp_seconds", sa.Float(), nullable=False),
        sa.Column("layout_id", sa.Integer(), sa.ForeignKey("layouts.id"), nullable=False),
        sa.Column("counts_json", sa.Text(), nullable=False),
        sa.Column("sum_value", sa.Float(), nullable=True),
        sa.Column("count", sa.Float(), nullable=False),
    )
    op.create_index(
        "ix_snapshots_series_time", "histogram_snapshots", ["series_id", "timestamp_seconds"]
    )
    op.create_table(
        "exemplars",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("series_id", sa.Integer(), sa.ForeignKey("series.id"), nullable=False),
        sa.Column("scrape_id", sa.Integer(), sa.ForeignKey("scrapes.id"), nullable=False),
        sa.Column("upper_bound", sa.Float(), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("labels_json", sa.Text(), nullable=False),
        sa.Column("timestamp_seconds", sa.Float(), nullable=True),
    )
    op.create_index("ix_exemplars_series_id", "exemplars", ["series_id"])


def downgrade() -> None:
    for table in ("exemplars", "histogram_snapshots", "samples", "layouts", "series"):
        op.drop_table(table)
    op.drop_table("scrapes")
    op.drop_table("targets")
