"""The knob lab's results: ``lab_runs`` (one sweep or replay each) and ``lab_points`` (what
each knob value, rate and repeat measured), written by ``tailwatch sweep`` and ``tailwatch
replay`` and read by the console's knob lab. JSON values are JSON text (``Text``): NaN and
Infinity round-trip, which PostgreSQL's JSON types refuse.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _id() -> sa.types.TypeEngine:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "lab_runs",
        sa.Column("id", _id(), primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("simulated", sa.Boolean(), nullable=False),
        sa.Column("created_at_seconds", sa.Float(), nullable=False),
        sa.Column("finished_at_seconds", sa.Float(), nullable=True),
        sa.Column("sweep_knob", sa.Text(), nullable=True),
        sa.Column("num_repeats", sa.Integer(), nullable=False),
        sa.Column("num_planned_points", sa.Integer(), nullable=False),
        sa.Column("window_start_seconds", sa.Float(), nullable=True),
        sa.Column("window_end_seconds", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("knobs_json", sa.Text(), nullable=False),
        sa.Column("workload_json", sa.Text(), nullable=False),
        sa.Column("knob_values_json", sa.Text(), nullable=False),
        sa.Column("rates_json", sa.Text(), nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_lab_runs_kind_created_at", "lab_runs", ["kind", "created_at_seconds"])
    op.create_index("ix_lab_runs_created_at", "lab_runs", ["created_at_seconds"])
    op.create_table(
        "lab_points",
        sa.Column("id", _id(), primary_key=True, autoincrement=True),
        sa.Column(
            "run_id", _id(), sa.ForeignKey("lab_runs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("knob_value_json", sa.Text(), nullable=False),
        sa.Column("rate", sa.Float(), nullable=False),
        sa.Column("repeat", sa.Integer(), nullable=False),
        sa.Column("measured_at_seconds", sa.Float(), nullable=False),
        sa.Column("summary_json", sa.Text(), nullable=False),
        sa.Column("samples_json", sa.Text(), nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_lab_points_run_id", "lab_points", ["run_id", "id"])


def downgrade() -> None:
    op.drop_table("lab_points")
    op.drop_table("lab_runs")
