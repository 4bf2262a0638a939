"""Retention and 1-minute roll-ups: histogram and sample roll-up tables, the maintenance
state, and indexes on the raw tables' scrape ids and on scrape times (retention deletes by
scrape, oldest first).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_samples_scrape_id", "samples", ["scrape_id"])
    op.create_index("ix_snapshots_scrape_id", "histogram_snapshots", ["scrape_id"])
    op.create_index("ix_exemplars_scrape_id", "exemplars", ["scrape_id"])
    op.create_index("ix_scrapes_timestamp_seconds", "scrapes", ["timestamp_seconds"])
    op.create_table(
        "histogram_rollups",
        sa.Column("series_id", sa.Integer(), sa.ForeignKey("series.id"), primary_key=True),
        sa.Column("start_seconds", sa.Float(), primary_key=True),
        sa.Column("layout_id", sa.Integer(), sa.ForeignKey("layouts.id"), nullable=False),
        sa.Column("other_layout_id", sa.Integer(), sa.ForeignKey("layouts.id"), nullable=True),
        sa.Column("pairs", sa.Integer(), nullable=False),
        sa.Column("counts_json", sa.Text(), nullable=False),
        sa.Column("sum_value", sa.Float(), nullable=True),
        sa.Column("count", sa.Float(), nullable=False),
    )
    op.create_index("ix_histogram_rollups_start_seconds", "histogram_rollups", ["start_seconds"])
    op.create_table(
        "sample_rollups",
        sa.Column("series_id", sa.Integer(), sa.ForeignKey("series.id"), primary_key=True),
        sa.Column("start_seconds", sa.Float(), primary_key=True),
        sa.Column("pairs", sa.Integer(), nullable=False),
        sa.Column("increase", sa.Float(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("last_value", sa.Float(), nullable=False),
        sa.Column("min_value", sa.Float(), nullable=False),
        sa.Column("max_value", sa.Float(), nullable=False),
        sa.Column("sum_value", sa.Float(), nullable=False),
    )
    op.create_index("ix_sample_rollups_start_seconds", "sample_rollups", ["start_seconds"])
    op.create_table(
        "rollup_state",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("processed_scrape_id", sa.Integer(), nullable=False),
        sa.Column("settled_scrape_id", sa.Integer(), nullable=False),
        sa.Column("processed_count", sa.Integer(), nullable=False),
        sa.Column("mark_scrape_id", sa.Integer(), nullable=True),
        sa.Column("mark_seconds", sa.Float(), nullable=True),
        sa.Column("newest_seconds", sa.Float(), nullable=True),
        sa.Column("raw_horizon_seconds", sa.Float(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("rollup_state")
    op.drop_table("sample_rollups")
    op.drop_table("histogram_rollups")
    op.drop_index("ix_scrapes_timestamp_seconds", "scrapes")
    op.drop_index("ix_exemplars_scrape_id", "exemplars")
    op.drop_index("ix_snapshots_scrape_id", "histogram_snapshots")
    op.drop_index("ix_samples_scrape_id", "samples")
