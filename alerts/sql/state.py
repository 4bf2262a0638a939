"""The evaluator's alert states, transition history and silences in the store
(:class:`alerts.state.AlertStateStore` over SQL; tables of revision 0004).

Each row keeps the exact data as JSON text (``alert_json``, ``silence_json``), which the reads
decode, so an alert or silence reads back equal to what was saved: any Unicode in labels,
annotations and free text, NUL included, a NaN or infinite value, every time. The plain
columns beside it (``alertname``, ``state``, times, the silence's matchers, author, comment)
are copies for SQL queries and indexes.

NUL: PostgreSQL's ``text`` cannot hold the character U+0000. In the JSON text it is the escape
``\\u0000`` (so it round-trips exactly); in the plain copies it is written as U+FFFD, as the
scrape writer does for scrape errors, and they are clipped to their column's length. A history
read filtered by ``alertname`` selects by the copy (using the index), then compares the exact
name, so two names that differ only there are never mixed up.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.orm import Session, sessionmaker

from alerts.incidents import Acknowledgement, Incident, check_incident_id
from alerts.matchers import format_matchers
from alerts.model import Alert, AlertState
from alerts.rule_errors import EvaluationError, EvaluationHealth
from alerts.silences import Silence
from alerts.sql import records as alert_records
from alerts.sql.codec import (
    decode_alert,
    decode_silence,
    encode_alert,
    encode_silence,
    plain_text,
)
from alerts.state import check_evaluation_times, check_notified
from alerts.transitions import Notified, Transition
from collectors.store.codec import digest
from collectors.store.models import AlertStateRow, AlertTransitionRow, SilenceRow

#: History rows read per query when an ``alertname`` filter must also be checked exactly.
_PAGE = 1_000
_ACTIVE = (AlertState.PENDING, AlertState.FIRING)


class SQLAlertState:
    """:class:`alerts.state.AlertStateStore` on the store's tables. Writes take
    ``write_lock`` (the store's, shared with its other writers)."""

    def __init__(
        self, sessions: sessionmaker[Session], write_lock: threading.Lock | None = None
    ) -> None:
        self._sessions = sessions
        self._write_lock = write_lock or threading.Lock()

    # -- alert states and history ------------------------------------------------------------

    def active_alerts(self) -> list[Alert]:
        """The pending and firing alerts as last saved, in the order they were saved."""
        query = select(AlertStateRow.alert_json).order_by(AlertStateRow.position)
        with self._sessions() as session:
            return [decode_alert(text) for text in session.scalars(query)]

    def save_evaluation(
        self,
        alerts: Sequence[Alert],
        transitions: Sequence[Transition],
        errors: Sequence[EvaluationError] = (),
        at_seconds: float | None = None,
    ) -> None:
        """Replace the active alerts with the pending and firing ones of ``alerts`` (one per
        fingerprint: a later one replaces an earlier), append ``transitions``, open, update
        and close their incidents and record ``errors`` and ``at_seconds``, in one
        transaction. Raises ``ValueError`` (writing nothing) for a transition whose time is
        not finite or whose fingerprint is not 16 hex digits, or an ``at_seconds`` or error
        time that is not finite."""
        check_evaluation_times(errors, at_seconds)
        active: dict[str, Alert] = {a.fingerprint: a for a in alerts if a.state in _ACTIVE}
        state_rows = [
            {
                "fingerprint": fingerprint,
                "position": position,
                "alertname": plain_text(alert.name),
                "state": alert.state.value,
                "active_at_seconds": alert.active_at_seconds,
                "started_at_seconds": alert.started_at_seconds,
                "alert_json": encode_alert(alert),
            }
            for position, (fingerprint, alert) in enumerate(active.items())
        ]
        transition_rows = [_transition_row(t) for t in transitions]
        with self._write_lock, self._sessions() as session:
            session.execute(delete(AlertStateRow))
            if state_rows:
                session.execute(insert(AlertStateRow), state_rows)
            if transition_rows:
                session.execute(insert(AlertTransitionRow), transition_rows)
            alert_records.save_incidents(session, list(active.values()), transitions)
            alert_records.save_failures(session, errors, at_seconds)
            session.commit()

    # -- incidents, rule failures, notifier memory ---------------------------------------------

    def incident(self, incident_id: int) -> Incident | None:
        """The incident with ``incident_id`` (``None``: none has it)."""
        checked = check_incident_id(incident_id)
        if checked is None:
            return None
        with self._sessions() as session:
            return alert_records.read_incident(session, checked)

    def incidents(self, *, since_seconds: float = -math.inf, limit: int = 100) -> list[Incident]:
        """Open incidents, then those resolved at or after ``since_seconds``, newest first."""
        with self._sessions() as session:
            return alert_records.read_incidents(session, since_seconds, limit)

    def acknowledge(self, incident_id: int, ack: Acknowledgement) -> Acknowledgement | None:
        """Record ``ack`` on open incident ``incident_id``, in one transaction under the write
        lock; the acknowledgement it replaced (``AcknowledgementError``: unknown, resolved)."""
        if not isinstance(ack, Acknowledgement):
            raise TypeError(f"ack={ack!r}: expected an Acknowledgement")
        with self._write_lock, self._sessions() as session:
            before = alert_records.acknowledge(session, check_incident_id(incident_id), ack)
            session.commit()
        return before

    def unacknowledge(self, incident_id: int) -> Acknowledgement:
        """Clear open incident ``incident_id``'s acknowledgement and return it."""
        with self._write_lock, self._sessions() as session:
            ack = alert_records.unacknowledge(session, check_incident_id(incident_id))
            session.commit()
        return ack

    def evaluation_health(self) -> EvaluationHealth:
        with self._sessions() as session:
            return alert_records.read_health(session)

    def notified(self) -> list[Notified]:
        with self._sessions() as session:
            return alert_records.read_notified(session)

    def save_notified(self, notifier: str, records: Sequence[Notified]) -> None:
        """Replace what ``notifier`` has had with ``records``, in one transaction."""
        check_notified(notifier, records)
        with self._write_lock, self._sessions() as session:
            alert_records.save_notified(session, notifier, records)
            session.commit()

    def history(
        self, start: float, end: float, *, alertname: str | None = None, limit: int = 10_000
    ) -> list[Transition]:
        """Transitions with ``start <= at <= end``, oldest first (saved order among equal
        times), at most ``limit``; only ``alertname``'s when given."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit={limit!r}: must be a positive integer")
        if math.isnan(start) or math.isnan(end):
            return []  # NOTE: PostgreSQL orders NaN above every number; nothing lies between
        query = select(AlertTransitionRow).where(
            AlertTransitionRow.at_seconds >= start, AlertTransitionRow.at_seconds <= end
        )
        if alertname is not None:
            query = query.where(AlertTransitionRow.alertname == plain_text(alertname))
        query = query.order_by(AlertTransitionRow.at_seconds, AlertTransitionRow.id)
        found: list[Transition] = []
        after: tuple[float, int] | None = None
        with self._sessions() as session:
            while len(found) < limit:
                page = query
                if after is not None:
                    at, row_id = after
                    page = page.where(
                        (AlertTransitionRow.at_seconds > at)
                        | ((AlertTransitionRow.at_seconds == at) & (AlertTransitionRow.id > row_id))
                    )
                rows = list(session.scalars(page.limit(min(limit, _PAGE))))
                for row in rows:
                    transition = _transition(row)
                    if alertname is None or transition.alert.name == alertname:
                        found.append(transition)
                if len(rows) < min(limit, _PAGE):
                    break
                after = (rows[-1].at_seconds, rows[-1].id)
        return found[:limit]

    # -- silences ----------------------------------------------------------------------------

    def silences(self) -> list[Silence]:
        """Every stored silence, expired ones included, in the order first saved."""
        query = select(SilenceRow.silence_json).order_by(SilenceRow.seq)
        with self._sessions() as session:
            return [decode_silence(text) for text in session.scalars(query)]

    def save_silence(self, silence: Silence) -> None:
        """Add ``silence``, or replace the stored one with its id (keeping its place)."""
        key = digest(silence.id)
        row = {
            "id": plain_text(silence.id),
            "matchers": plain_text(format_matchers(silence.matchers), None),
            "starts_at_seconds": silence.starts_at_seconds,
            "ends_at_seconds": silence.ends_at_seconds,
            "created_by": plain_text(silence.created_by, None),
            "comment": plain_text(silence.comment, None),
            "silence_json": encode_silence(silence),
        }
        with self._write_lock, self._sessions() as session:
            changed = session.execute(
                update(SilenceRow).where(SilenceRow.id_hash == key).values(**row)
            ).rowcount
            if not changed:
                session.execute(insert(SilenceRow), [{"id_hash": key, **row}])
            session.commit()


def _transition_row(transition: Transition) -> dict[str, Any]:
    at, fingerprint = transition.at_seconds, transition.fingerprint
    if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at):
        raise ValueError(f"transition at_seconds={at!r}: must be a finite time in Unix seconds")
    if not isinstance(fingerprint, str) or len(fingerprint) != 16 or not _is_hex(fingerprint):
        raise ValueError(f"transition fingerprint={fingerprint!r}: must be 16 hex digits")
    return {
        "at_seconds": at,
        "fingerprint": fingerprint,
        "alertname": plain_text(transition.alert.name),
        "from_state": AlertState(transition.from_state).value,
        "to_state": AlertState(transition.to_state).value,
        "alert_json": encode_alert(transition.alert),
    }


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)


def _transition(row: AlertTransitionRow) -> Transition:
    return Transition(
        at_seconds=row.at_seconds,
        fingerprint=row.fingerprint,
        from_state=AlertState(row.from_state),
        to_state=AlertState(row.to_state),
        alert=decode_alert(row.alert_json),
    )
