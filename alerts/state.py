"""Where the evaluator keeps what it must not forget: alert states (so a restart resumes a
pending ``for:`` and a firing alert instead of starting over), the history of transitions,
incidents (one per firing episode, :mod:`alerts.incidents`), the rules that failed
(:mod:`alerts.rule_errors`), what each notifier has had (so a restart does not send again) and
silences. The SQL store implements :class:`AlertStateStore`; :class:`MemoryAlertState` keeps
the same in memory, for tests and for an evaluator run without a database. The records it
keeps (:class:`~alerts.transitions.Transition`, :class:`~alerts.transitions.Notified`) are
plain values in :mod:`alerts.transitions`; import them from there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from alerts.incidents import (
    Acknowledgement,
    Incident,
    check_can_acknowledge,
    check_can_unacknowledge,
    check_incident_id,
    check_limit,
    episode_key,
    episodes,
    listing_order,
    merged,
)
from alerts.model import Alert, AlertState
from alerts.rule_errors import (
    EvaluationError,
    EvaluationHealth,
    RuleFailure,
    latest_first,
    recorded,
)
from alerts.silences import Silence
from alerts.transitions import Notified, Transition


def check_evaluation_times(errors: Sequence[EvaluationError], at_seconds: float | None) -> None:
    """A ``ValueError`` (nothing is written) for an evaluation or error time not finite."""
    for at in [at_seconds, *(e.at_seconds for e in errors)]:
        if at is None:
            continue
        if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at):
            raise ValueError(f"evaluation time {at!r}: must be finite Unix seconds")


def check_notified(notifier: str, records: Sequence[Notified]) -> None:
    """A ``ValueError`` (nothing is written) for a notifier key that is not 1-255 characters
    without NUL, a record of another notifier, a state neither firing nor resolved, a
    fingerprint not the alert's or given twice, or a time that is not finite."""
    if not isinstance(notifier, str) or not 0 < len(notifier) <= 255 or "\x00" in notifier:
        raise ValueError(f"notifier={notifier!r}: must be 1-255 characters without NUL")
    seen: set[str] = set()
    for record in records:
        if record.notifier != notifier:
            raise ValueError(f"record for notifier {record.notifier!r} saved as {notifier!r}'s")
        if record.state not in (AlertState.FIRING, AlertState.RESOLVED):
            raise ValueError(f"notified state {record.state!r}: must be firing or resolved")
        if record.fingerprint != record.alert.fingerprint or record.fingerprint in seen:
            raise ValueError(
                f"notified fingerprint {record.fingerprint!r}: not the alert's, or twice"
            )
        if not math.isfinite(record.at_seconds):
            raise ValueError(f"notified at_seconds={record.at_seconds!r}: must be finite")
        seen.add(record.fingerprint)


@runtime_checkable
class AlertStateStore(Protocol):
    def active_alerts(self) -> list[Alert]:
        """The pending and firing alerts as last saved (what a restarted evaluator resumes)."""
        ...

    def save_evaluation(
        self,
        alerts: Sequence[Alert],
        transitions: Sequence[Transition],
        errors: Sequence[EvaluationError] = (),
        at_seconds: float | None = None,
    ) -> None:
        """Replace the active alerts with ``alerts`` (pending and firing ones; resolved ones are
        kept only in the history), append ``transitions``, open, update and close the
        incidents they touch (:func:`alerts.incidents.episodes`) and record the rules'
        ``errors``, in one transaction. ``at_seconds``: the evaluation's time, kept as the
        last evaluation (a rule whose last failure is before it works again)."""
        ...

    def history(
        self, start: float, end: float, *, alertname: str | None = None, limit: int = 10_000
    ) -> list[Transition]:
        """Transitions with ``start <= at <= end``, oldest first, at most ``limit``."""
        ...

    def incident(self, incident_id: int) -> Incident | None:
        """The incident with ``incident_id``; ``None`` when there is none (any id, even one
        no incident can have, is a plain miss)."""
        ...

    def incidents(self, *, since_seconds: float = -math.inf, limit: int = 100) -> list[Incident]:
        """Open incidents, then those resolved at or after ``since_seconds``, each newest
        first (by start, then id), at most ``limit`` (``ValueError`` unless positive)."""
        ...

    def acknowledge(self, incident_id: int, ack: Acknowledgement) -> Acknowledgement | None:
        """Record that ``ack.by`` is on open incident ``incident_id``, replacing any earlier
        acknowledgement, which it returns (``None``: there was none). Mutes nothing.
        :class:`~alerts.errors.AcknowledgementError` (nothing written) for an unknown or
        resolved incident."""
        ...

    def unacknowledge(self, incident_id: int) -> Acknowledgement:
        """Undo open incident ``incident_id``'s acknowledgement and return it;
        :class:`~alerts.errors.AcknowledgementError` for an unknown or resolved incident, or
        one not acknowledged."""
        ...

    def evaluation_health(self) -> EvaluationHealth:
        """When the last evaluation was saved, and each rule's stored failures."""
        ...

    def notified(self) -> list[Notified]:
        """What every notifier has had (see :class:`Notified`)."""
        ...

    def save_notified(self, notifier: str, records: Sequence[Notified]) -> None:
        """Replace what ``notifier`` has had with ``records`` (all of that notifier's)."""
        ...

    def silences(self) -> list[Silence]:
        """Every stored silence, expired ones included (the CLI lists them)."""
        ...

    def save_silence(self, silence: Silence) -> None:
        """Add a silence, or replace the one with its id (expiring one is replacing it)."""
        ...


class MemoryAlertState:
    """:class:`AlertStateStore` in memory."""

    def __init__(self) -> None:
        self._active: dict[str, Alert] = {}
        self._history: list[Transition] = []
        self._silences: dict[str, Silence] = {}
        self._incidents: dict[int, Incident] = {}
        self._incident_ids: dict[tuple[str, float], int] = {}
        self._last_incident_id = 0
        self._failures: dict[str, RuleFailure] = {}
        self._last_evaluation: float | None = None
        self._notified: dict[str, list[Notified]] = {}

    def active_alerts(self) -> list[Alert]:
        return list(self._active.values())

    def save_evaluation(
        self,
        alerts: Sequence[Alert],
        transitions: Sequence[Transition],
        errors: Sequence[EvaluationError] = (),
        at_seconds: float | None = None,
    ) -> None:
        check_evaluation_times(errors, at_seconds)
        self._active = {
            a.fingerprint: a for a in alerts if a.state in (AlertState.PENDING, AlertState.FIRING)
        }
        self._history.extend(transitions)
        for alert in episodes(list(self._active.values()), transitions):
            key = episode_key(alert)
            known = self._incident_ids.get(key)
            if known is None:
                self._last_incident_id += 1
                known = self._incident_ids[key] = self._last_incident_id
            before = self._incidents.get(known)
            if before is not None:
                alert = merged(before.alert, alert)
            self._incidents[known] = Incident(known, alert, None if before is None else before.ack)
        self._failures.update(recorded(self._failures, errors))
        if at_seconds is not None:
            self._last_evaluation = at_seconds

    def incident(self, incident_id: int) -> Incident | None:
        checked = check_incident_id(incident_id)
        return None if checked is None else self._incidents.get(checked)

    def incidents(self, *, since_seconds: float = -math.inf, limit: int = 100) -> list[Incident]:
        return listing_order(list(self._incidents.values()), since_seconds, limit)

    def acknowledge(self, incident_id: int, ack: Acknowledgement) -> Acknowledgement | None:
        if not isinstance(ack, Acknowledgement):
            raise TypeError(f"ack={ack!r}: expected an Acknowledgement")
        incident = check_can_acknowledge(self.incident(incident_id), incident_id)
        self._incidents[incident.id] = Incident(incident.id, incident.alert, ack)
        return incident.ack

    def unacknowledge(self, incident_id: int) -> Acknowledgement:
        ack = check_can_unacknowledge(self.incident(incident_id), incident_id)
        incident = self._incidents[incident_id]
        self._incidents[incident_id] = Incident(incident.id, incident.alert)
        return ack

    def evaluation_health(self) -> EvaluationHealth:
        return EvaluationHealth(self._last_evaluation, latest_first(list(self._failures.values())))

    def notified(self) -> list[Notified]:
        return [r for records in self._notified.values() for r in records]

    def save_notified(self, notifier: str, records: Sequence[Notified]) -> None:
        check_notified(notifier, records)
        self._notified[notifier] = list(records)

    def history(
        self, start: float, end: float, *, alertname: str | None = None, limit: int = 10_000
    ) -> list[Transition]:
        check_limit(limit)
        chosen = [
            t
            for t in self._history
            if start <= t.at_seconds <= end and (alertname is None or t.alert.name == alertname)
        ]
        chosen.sort(key=lambda t: t.at_seconds)
        return chosen[:limit]

    def silences(self) -> list[Silence]:
        return list(self._silences.values())

    def save_silence(self, silence: Silence) -> None:
        self._silences[silence.id] = silence
