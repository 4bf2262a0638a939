"""Retention of the evaluator's records, beside the other data in a maintenance pass: the
transition history, resolved incidents, rule failures, notifier memory, silences and the
change events triage reads as evidence, that expired longer ago than the alert retention (``RetentionPolicy.alert_retention_seconds``),
oldest first, in bounded batches (Alertmanager likewise drops expired silences after its
``--data.retention``). What is live is never deleted: the active alerts, open incidents
(however old), and silences not yet expired."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from collectors.store.alert_models import IncidentRow, NotifiedRow, RuleFailureRow
from collectors.store.change_models import ChangeEventRow
from collectors.store.models import AlertTransitionRow, SilenceRow
from collectors.store.sql import chunks


@dataclass(frozen=True)
class AlertExpiry:
    """What one :func:`expire_alert_records` call deleted; ``more_to_do``: a batch limit
    stopped it."""

    alert_transitions_deleted: int
    incidents_deleted: int
    rule_failures_deleted: int
    notified_deleted: int
    silences_deleted: int
    more_to_do: bool
    change_events_deleted: int = 0


def expire_alert_records(session: Session, *, cutoff_seconds: float, limit: int) -> AlertExpiry:
    """Delete transitions before ``cutoff_seconds``, incidents resolved before it, rule
    failures last seen before it, notifier records from before it, silences that ended
    before it and change events from before it: at most ``limit`` of each, oldest first."""
    deleted: list[int] = []
    more_to_do = False
    for key, column in (
        (AlertTransitionRow.id, AlertTransitionRow.at_seconds),
        (IncidentRow.id, IncidentRow.resolved_at_seconds),  # NOTE: NULL (open) never matches
        (RuleFailureRow.rule_hash, RuleFailureRow.last_failed_seconds),
        (SilenceRow.seq, SilenceRow.ends_at_seconds),
        (ChangeEventRow.id, ChangeEventRow.at_seconds),
    ):
        keys = list(
            session.scalars(
                select(key).where(column < cutoff_seconds).order_by(column).limit(limit + 1)
            )
        )
        more_to_do = more_to_do or len(keys) > limit
        keys = keys[:limit]
        for chunk in chunks(keys):
            session.execute(delete(key.class_).where(key.in_(chunk)))
        deleted.append(len(keys))
    # NOTE: a notifier record's key has two columns; it is deleted by its time, in a batch.
    old = session.execute(
        select(NotifiedRow.notifier, NotifiedRow.fingerprint)
        .where(NotifiedRow.at_seconds < cutoff_seconds)
        .order_by(NotifiedRow.at_seconds)
        .limit(limit + 1)
    ).all()
    more_to_do = more_to_do or len(old) > limit
    for notifier, fingerprint in old[:limit]:
        session.execute(
            delete(NotifiedRow).where(
                NotifiedRow.notifier == notifier, NotifiedRow.fingerprint == fingerprint
            )
        )
    transitions, incidents, failures, silences, changes = deleted
    return AlertExpiry(
        transitions, incidents, failures, len(old[:limit]), silences, more_to_do, changes
    )
