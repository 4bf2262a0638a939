"""The SQL side of incidents, rule failures, the last evaluation time and what each notifier
has had (tables of revision 0005, ``collectors/store/alert_models.py``): functions on an open
session, so :class:`~alerts.sql.state.SQLAlertState` runs them inside the
transaction of the save they belong to. The semantics are ``alerts/``'s
(:func:`alerts.incidents.episodes`, :func:`alerts.rule_errors.recorded`), shared with
``MemoryAlertState``."""

from __future__ import annotations

import math
from collections.abc import Sequence

from sqlalchemy import bindparam, delete, insert, select, update
from sqlalchemy.orm import Session

from alerts.incidents import (
    Acknowledgement,
    Incident,
    check_can_acknowledge,
    check_can_unacknowledge,
    check_limit,
    episode_key,
    episodes,
)
from alerts.model import Alert, AlertState
from alerts.rule_errors import (
    EvaluationError,
    EvaluationHealth,
    RuleFailure,
    latest_first,
    recorded,
)
from alerts.sql.codec import (
    decode_alert,
    decode_failure,
    encode_alert,
    encode_failure,
    plain_text,
)
from alerts.transitions import Notified, Transition
from collectors.store.alert_models import (
    EvaluatorStateRow,
    IncidentRow,
    NotifiedRow,
    RuleFailureRow,
)
from collectors.store.codec import digest
from collectors.store.sql import chunks

# -- incidents -------------------------------------------------------------------------------


def save_incidents(
    session: Session, alerts: Sequence[Alert], transitions: Sequence[Transition]
) -> None:
    """Open, update and close the incidents of the episodes one save touches."""
    touched = episodes(alerts, transitions)
    if not touched:
        return
    earliest = min(episode_key(a)[1] for a in touched)
    stored: dict[tuple[str, float], tuple[int, bool, str]] = {}
    for chunk in chunks(sorted({a.fingerprint for a in touched})):
        query = select(
            IncidentRow.id,
            IncidentRow.fingerprint,
            IncidentRow.started_at_seconds,
            IncidentRow.resolved_at_seconds,
            IncidentRow.alert_json,
        ).where(IncidentRow.fingerprint.in_(chunk), IncidentRow.started_at_seconds >= earliest)
        for row_id, fingerprint, started, resolved_at, text in session.execute(query):
            stored[(fingerprint, started)] = (row_id, resolved_at is not None, text)
    changed = []
    for alert in touched:
        known = stored.get(episode_key(alert))
        if known is None:
            # NOTE: one row at a time keeps the ids in first-seen order on every database
            session.execute(insert(IncidentRow), [_incident_row(alert)])
            continue
        row_id, is_closed, text = known
        encoded = encode_alert(alert)
        if not is_closed and encoded != text:  # NOTE: a closed incident never reopens
            changed.append({"row_id": row_id, "resolved": alert.ended_at_seconds, "json": encoded})
    if changed:
        session.connection().execute(_UPDATE_INCIDENT, changed)


# NOTE: one statement for every changed incident (executemany): each open incident changes at
# each evaluation (its value), so this runs every cycle.
_UPDATE_INCIDENT = (
    update(IncidentRow)
    .where(IncidentRow.id == bindparam("row_id"))
    .values(resolved_at_seconds=bindparam("resolved"), alert_json=bindparam("json"))
)


def _incident_row(alert: Alert) -> dict[str, object]:
    return {
        "fingerprint": alert.fingerprint,
        "alertname": plain_text(alert.name),
        "severity": plain_text(alert.labels.get("severity", "")),
        "active_at_seconds": alert.active_at_seconds,
        "started_at_seconds": alert.started_at_seconds,
        "resolved_at_seconds": alert.ended_at_seconds,
        "alert_json": encode_alert(alert),
    }


#: What an :class:`Incident` is read from: its id, the alert and the acknowledgement.
_INCIDENT_COLUMNS = (
    IncidentRow.id,
    IncidentRow.alert_json,
    IncidentRow.ack_by,
    IncidentRow.ack_at_seconds,
    IncidentRow.ack_comment,
)


def _incident(
    row_id: int, text: str, by: str | None, at: float | None, comment: str | None
) -> Incident:
    ack = None if by is None or at is None else Acknowledgement(by, at, comment or "")
    return Incident(row_id, decode_alert(text), ack)


def read_incident(session: Session, incident_id: int) -> Incident | None:
    row = session.execute(select(*_INCIDENT_COLUMNS).where(IncidentRow.id == incident_id)).first()
    return None if row is None else _incident(*row)


def read_incidents(session: Session, since_seconds: float, limit: int) -> list[Incident]:
    """Open incidents, then those resolved at or after ``since_seconds``, newest first."""
    check_limit(limit)
    newest = (IncidentRow.started_at_seconds.desc(), IncidentRow.id.desc())
    columns = select(*_INCIDENT_COLUMNS)
    open_rows = session.execute(
        columns.where(IncidentRow.resolved_at_seconds.is_(None)).order_by(*newest).limit(limit)
    ).all()
    rows = list(open_rows)
    if len(rows) < limit and not math.isnan(since_seconds):
        resolved = columns.where(IncidentRow.resolved_at_seconds.is_not(None))
        if since_seconds > -math.inf:
            resolved = resolved.where(IncidentRow.resolved_at_seconds >= since_seconds)
        rows += session.execute(resolved.order_by(*newest).limit(limit - len(rows))).all()
    return [_incident(*row) for row in rows]


def acknowledge(
    session: Session, incident_id: int | None, ack: Acknowledgement
) -> Acknowledgement | None:
    """Record ``ack`` on open incident ``incident_id`` (``None``: an id no incident can have);
    the acknowledgement it replaces, or ``AcknowledgementError``. The caller commits."""
    found = None if incident_id is None else read_incident(session, incident_id)
    incident = check_can_acknowledge(found, incident_id)
    _set_ack(session, incident.id, ack)
    return incident.ack


def unacknowledge(session: Session, incident_id: int | None) -> Acknowledgement:
    """Clear open incident ``incident_id``'s acknowledgement and return it."""
    found = None if incident_id is None else read_incident(session, incident_id)
    ack = check_can_unacknowledge(found, incident_id)
    assert found is not None
    _set_ack(session, found.id, None)
    return ack


def _set_ack(session: Session, incident_id: int, ack: Acknowledgement | None) -> None:
    """Set or clear the acknowledgement while the incident is open; one that resolved since
    it was read (the evaluator runs in another process) is refused as resolved."""
    changed = session.execute(
        update(IncidentRow)
        .where(IncidentRow.id == incident_id, IncidentRow.resolved_at_seconds.is_(None))
        .values(
            ack_by=None if ack is None else ack.by,
            ack_at_seconds=None if ack is None else ack.at_seconds,
            ack_comment=None if ack is None else ack.comment,
        )
    ).rowcount
    if not changed:
        check_can_acknowledge(read_incident(session, incident_id), incident_id)


# -- rule failures and the last evaluation ---------------------------------------------------


def save_failures(
    session: Session, errors: Sequence[EvaluationError], at_seconds: float | None
) -> None:
    """Add ``errors`` to their rules' records and keep ``at_seconds`` as the last evaluation."""
    if errors:
        keys = {digest(e.rule): e.rule for e in errors}
        previous: dict[str, RuleFailure] = {}
        for chunk in chunks(sorted(keys)):
            query = select(RuleFailureRow.failure_json).where(RuleFailureRow.rule_hash.in_(chunk))
            for text in session.scalars(query):
                failure = decode_failure(text)
                previous[failure.rule] = failure
        for rule, failure in recorded(previous, errors).items():
            row = {
                "rule": plain_text(rule, None),
                "error_type": plain_text(failure.error_type),
                "message": plain_text(failure.message, None),
                "first_failed_seconds": failure.first_failed_seconds,
                "last_failed_seconds": failure.last_failed_seconds,
                "num_failures": failure.num_failures,
                "failure_json": encode_failure(failure),
            }
            if rule in previous:
                session.execute(
                    update(RuleFailureRow)
                    .where(RuleFailureRow.rule_hash == digest(rule))
                    .values(**row)
                )
            else:
                session.execute(insert(RuleFailureRow), [{"rule_hash": digest(rule), **row}])
    if at_seconds is not None:
        changed = session.execute(
            update(EvaluatorStateRow)
            .where(EvaluatorStateRow.id == 1)
            .values(last_evaluation_seconds=at_seconds)
        ).rowcount
        if not changed:
            session.execute(
                insert(EvaluatorStateRow), [{"id": 1, "last_evaluation_seconds": at_seconds}]
            )


def read_health(session: Session) -> EvaluationHealth:
    last = session.scalar(
        select(EvaluatorStateRow.last_evaluation_seconds).where(EvaluatorStateRow.id == 1)
    )
    failures = [decode_failure(t) for t in session.scalars(select(RuleFailureRow.failure_json))]
    return EvaluationHealth(last, latest_first(failures))


# -- what each notifier has had ---------------------------------------------------------------


def read_notified(session: Session) -> list[Notified]:
    query = select(NotifiedRow).order_by(NotifiedRow.notifier, NotifiedRow.fingerprint)
    return [
        Notified(
            row.notifier,
            row.fingerprint,
            AlertState(row.state),
            row.at_seconds,
            decode_alert(row.alert_json),
        )
        for row in session.scalars(query)
    ]


def save_notified(session: Session, notifier: str, records: Sequence[Notified]) -> None:
    session.execute(delete(NotifiedRow).where(NotifiedRow.notifier == notifier))
    rows = {
        r.fingerprint: {
            "notifier": notifier,
            "fingerprint": r.fingerprint,
            "state": r.state.value,
            "at_seconds": r.at_seconds,
            "alert_json": encode_alert(r.alert),
        }
        for r in records
    }
    if rows:
        session.execute(insert(NotifiedRow), list(rows.values()))
