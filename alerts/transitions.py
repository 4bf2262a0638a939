"""The alert evaluator's value records: :class:`Transition` (one change of an alert's state,
as the history keeps it) and :class:`Notified` (what one notifier has had of one alert).

Plain frozen dataclasses over :mod:`alerts.model`, with no store behind them, so the modules
that work on them (:mod:`alerts.incidents`, :mod:`alerts.state` and the SQL store) all import
them from here, and none of those has to import another to name them.
"""

from __future__ import annotations

from dataclasses import dataclass

from alerts.model import Alert, AlertState


@dataclass(frozen=True)
class Transition:
    """One change of an alert's state, as the history keeps it: which alert (fingerprint and
    the alert as it was after the change), from which state to which, and when."""

    at_seconds: float
    fingerprint: str
    from_state: AlertState
    to_state: AlertState
    alert: Alert


@dataclass(frozen=True)
class Notified:
    """What one notifier has had of one alert (the dispatcher's memory, kept across restarts):
    ``state`` FIRING: it took the alert firing, last at ``at_seconds`` (resent once the
    resend interval has passed); RESOLVED: the alert's resolution failed to reach it and is
    retried (``at_seconds``: when the alert resolved). ``notifier`` is the dispatcher's key
    for the notifier (``alerts.notify.dispatch.notifier_key``)."""

    notifier: str
    fingerprint: str
    state: AlertState
    at_seconds: float
    alert: Alert
