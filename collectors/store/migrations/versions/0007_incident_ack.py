"""Acknowledged incidents: who acknowledged an incident, when and why (``ack_by``,
``ack_at_seconds``, ``ack_comment`` on ``alert_incidents``, all ``NULL`` when nobody has).
Existing incidents upgrade in place, none acknowledged.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NOTE: nullable columns without a default: an ALTER TABLE ADD COLUMN on SQLite and
    # PostgreSQL alike, no table copy.
    op.add_column("alert_incidents", sa.Column("ack_by", sa.Text(), nullable=True))
    op.add_column("alert_incidents", sa.Column("ack_at_seconds", sa.Float(), nullable=True))
    op.add_column("alert_incidents", sa.Column("ack_comment", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("alert_incidents") as batch:
        batch.drop_column("ack_comment")
        batch.drop_column("ack_at_seconds")
        batch.drop_column("ack_by")
