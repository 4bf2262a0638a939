"""Incidents (one per firing episode of an alert, with a never-reused integer id), rule
failures (the latest error per rule and a count), the evaluator's last evaluation time, and
what each notifier has had. Incidents are backfilled from the 0004 history and the firing
alerts, so the episodes stored before this revision can be listed and triaged by id.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_BATCH = 1_000


def upgrade() -> None:
    incidents = op.create_table(
        "alert_incidents",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("fingerprint", sa.String(16), nullable=False),
        sa.Column("alertname", sa.String(255), nullable=False),
        sa.Column("severity", sa.String(255), nullable=False),
        sa.Column("active_at_seconds", sa.Float(), nullable=False),
        sa.Column("started_at_seconds", sa.Float(), nullable=False),
        sa.Column("resolved_at_seconds", sa.Float(), nullable=True),
        sa.Column("alert_json", sa.Text(), nullable=False),
        sa.UniqueConstraint("fingerprint", "started_at_seconds", name="uq_alert_incidents_episode"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_alert_incidents_resolved_at", "alert_incidents", ["resolved_at_seconds"])
    op.create_index(
        "ix_alert_incidents_started_at_seconds", "alert_incidents", ["started_at_seconds"]
    )
    op.create_table(
        "alert_rule_failures",
        sa.Column("rule_hash", sa.String(64), primary_key=True),
        sa.Column("rule", sa.Text(), nullable=False),
        sa.Column("error_type", sa.String(255), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("first_failed_seconds", sa.Float(), nullable=False),
        sa.Column("last_failed_seconds", sa.Float(), nullable=False),
        sa.Column("num_failures", sa.BigInteger(), nullable=False),
        sa.Column("failure_json", sa.Text(), nullable=False),
    )
    op.create_index(
        "ix_alert_rule_failures_last_failed_seconds",
        "alert_rule_failures",
        ["last_failed_seconds"],
    )
    op.create_table(
        "alert_evaluator_state",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("last_evaluation_seconds", sa.Float(), nullable=False),
    )
    op.create_table(
        "alert_notified",
        sa.Column("notifier", sa.String(255), primary_key=True),
        sa.Column("fingerprint", sa.String(16), primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("at_seconds", sa.Float(), nullable=False),
        sa.Column("alert_json", sa.Text(), nullable=False),
    )
    op.create_index("ix_alert_notified_at_seconds", "alert_notified", ["at_seconds"])
    _backfill(incidents)


def _backfill(incidents: sa.Table) -> None:
    """One incident per (fingerprint, started at) of the firing and resolved alerts in the
    history and the firing alerts saved, a resolved version winning; ids in order of start.
    NOTE: self-contained (no import of the application's code), so it stays what it was."""
    connection = op.get_bind()
    found: dict[tuple[str, float], dict[str, Any]] = {}
    rows = connection.execute(
        sa.text(
            "SELECT fingerprint, alert_json FROM alert_transitions "
            "WHERE to_state IN ('firing', 'resolved') "
            "ORDER BY at_seconds, id"
        )
    )
    active = connection.execute(
        sa.text(
            "SELECT fingerprint, alert_json FROM alert_states WHERE state = 'firing' "
            "ORDER BY position"
        )
    )
    for fingerprint, text in [*rows, *active]:
        alert = json.loads(text)
        key = (fingerprint, alert["started_at_seconds"])
        before = found.get(key)
        if before is None or before["state"] != "resolved":
            found[key] = alert | {"_json": text}
    ordered = sorted(found.items(), key=lambda item: (item[0][1], item[0][0]))
    values = [
        {
            "fingerprint": fingerprint,
            "alertname": _plain(alert["labels"].get("alertname", "")),
            "severity": _plain(alert["labels"].get("severity", "")),
            "active_at_seconds": alert["active_at_seconds"],
            "started_at_seconds": started,
            "resolved_at_seconds": alert["ended_at_seconds"],
            "alert_json": alert["_json"],
        }
        for (fingerprint, started), alert in ordered
    ]
    for start in range(0, len(values), _BATCH):
        connection.execute(incidents.insert(), values[start : start + _BATCH])


def _plain(text: str) -> str:
    return text.replace("\x00", "\ufffd")[:255]


def downgrade() -> None:
    op.drop_table("alert_notified")
    op.drop_table("alert_evaluator_state")
    op.drop_table("alert_rule_failures")
    op.drop_table("alert_incidents")
