"""Where the evaluator keeps what it must not forget: alert states (so a restart resumes a
pending ``for:`` and a firing alert instead of starting over), the history of transitions, and
silences. The SQL store implements :class:`AlertStateStore`; :class:`MemoryAlertState` keeps
the same in memory, for tests and for an evaluator run without a database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from alerts.model import Alert, AlertState
from alerts.silences import Silence


@dataclass(frozen=True)
class Transition:
    """One change of an alert's state, as the history keeps it: which alert (fingerprint and
    the alert as it was after the change), from which state to which, and when."""

    at_seconds: float
    fingerprint: str
    from_state: AlertState
    to_state: AlertState
    alert: Alert


@runtime_checkable
class AlertStateStore(Protocol):
    def active_alerts(self) -> list[Alert]:
        """The pending and firing alerts as last saved (what a restarted evaluator resumes)."""
        ...

    def save_evaluation(self, alerts: Sequence[Alert], transitions: Sequence[Transition]) -> None:
        """Replace the active alerts with ``alerts`` (pending and firing ones; resolved ones are
        kept only in the history) and append ``transitions``, in one transaction."""
        ...

    def history(
        self, start: float, end: float, *, alertname: str | None = None, limit: int = 10_000
    ) -> list[Transition]:
        """Transitions with ``start <= at <= end``, oldest first, at most ``limit``."""
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

    def active_alerts(self) -> list[Alert]:
        return list(self._active.values())

    def save_evaluation(self, alerts: Sequence[Alert], transitions: Sequence[Transition]) -> None:
        self._active = {
            a.fingerprint: a for a in alerts if a.state in (AlertState.PENDING, AlertState.FIRING)
        }
        self._history.extend(transitions)

    def history(
        self, start: float, end: float, *, alertname: str | None = None, limit: int = 10_000
    ) -> list[Transition]:
        if limit < 1:
            raise ValueError(f"limit={limit!r}: must be a positive integer")
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
