"""Alert states (pending and firing, keyed by fingerprint), their transition history (indexed
on time and on alertname then time) and silences (keyed by the SHA-256 of their id).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "alert_states",
        sa.Column("fingerprint", sa.String(16), primary_key=True),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("alertname", sa.String(255), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("active_at_seconds", sa.Float(), nullable=True),
        sa.Column("started_at_seconds", sa.Float(), nullable=True),
        sa.Column("alert_json", sa.Text(), nullable=False),
    )
    op.create_table(
        "alert_transitions",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("at_seconds", sa.Float(), nullable=False),
        sa.Column("fingerprint", sa.String(16), nullable=False),
        sa.Column("alertname", sa.String(255), nullable=False),
        sa.Column("from_state", sa.String(16), nullable=False),
        sa.Column("to_state", sa.String(16), nullable=False),
        sa.Column("alert_json", sa.Text(), nullable=False),
    )
    op.create_index("ix_alert_transitions_at_seconds", "alert_transitions", ["at_seconds"])
    op.create_index(
        "ix_alert_transitions_alertname_at", "alert_transitions", ["alertname", "at_seconds"]
    )
    op.create_table(
        "silences",
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("id_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("id", sa.String(255), nullable=False),
        sa.Column("matchers", sa.Text(), nullable=False),
        sa.Column("starts_at_seconds", sa.Float(), nullable=False),
        sa.Column("ends_at_seconds", sa.Float(), nullable=False),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("silence_json", sa.Text(), nullable=False),
    )
    op.create_index("ix_silences_ends_at_seconds", "silences", ["ends_at_seconds"])


def downgrade() -> None:
    op.drop_table("silences")
    op.drop_table("alert_transitions")
    op.drop_table("alert_states")
