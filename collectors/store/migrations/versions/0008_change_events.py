"""Change events ("what changed?"): one row per change the collector's detector found (a
target's info labels, a live knob, the set of targets, the traffic mix), unique on the
event's identity. Existing stores upgrade with the table empty.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "change_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("at_seconds", sa.Float(), nullable=False),
        sa.Column("target", sa.String(512), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("before", sa.Text(), nullable=False),
        sa.Column("after", sa.Text(), nullable=False),
        sa.Column("identity_hash", sa.String(64), nullable=False),
        sa.UniqueConstraint("identity_hash", name="uq_change_events_identity"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_change_events_at", "change_events", ["at_seconds"])
    op.create_index("ix_change_events_target_at", "change_events", ["target", "at_seconds"])


def downgrade() -> None:
    op.drop_table("change_events")
