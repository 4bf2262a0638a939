"""Received spans and the request records derived from them.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "spans",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("span_id", sa.String(16), nullable=False),
        sa.Column("parent_span_id", sa.String(16), nullable=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("kind", sa.Integer(), nullable=False),
        sa.Column("start_seconds", sa.Float(), nullable=False),
        sa.Column("end_seconds", sa.Float(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("status_message", sa.Text(), nullable=False),
        sa.Column("service", sa.String(255), nullable=True),
        sa.Column("scope", sa.String(255), nullable=False),
        sa.Column("attributes_json", sa.Text(), nullable=False),
        sa.Column("events_json", sa.Text(), nullable=False),
        sa.Column("resource_json", sa.Text(), nullable=False),
        sa.UniqueConstraint("trace_id", "span_id"),
    )
    op.create_index("ix_spans_trace_id", "spans", ["trace_id"])
    op.create_index("ix_spans_start_seconds", "spans", ["start_seconds"])
    op.create_table(
        "request_records",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("request_id", sa.String(255), nullable=False),
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("span_id", sa.String(16), nullable=False),
        sa.Column("service", sa.String(255), nullable=True),
        sa.Column("tenant", sa.String(255), nullable=True),
        sa.Column("model", sa.String(255), nullable=True),
        sa.Column("replica", sa.String(255), nullable=True),
        sa.Column("arrival_seconds", sa.Float(), nullable=False),
        *(
            sa.Column(name, sa.Float(), nullable=True)
            for name in (
                "queue_seconds",
                "ttft_seconds",
                "prefill_seconds",
                "decode_seconds",
                "tpot_seconds",
                "e2e_seconds",
            )
        ),
        *(
            sa.Column(name, sa.Integer(), nullable=True)
            for name in ("input_tokens", "output_tokens", "cached_tokens", "preemptions")
        ),
        sa.Column("finish_reason", sa.String(64), nullable=True),
        sa.Column("is_error", sa.Boolean(), nullable=False),
        sa.UniqueConstraint("trace_id", "span_id"),
    )
    op.create_index("ix_request_records_request_id", "request_records", ["request_id"])
    op.create_index("ix_request_records_arrival_seconds", "request_records", ["arrival_seconds"])


def downgrade() -> None:
    op.drop_table("request_records")
    op.drop_table("spans")
