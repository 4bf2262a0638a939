"""The notification step after each evaluation: which alerts go to which notifier.

Per notifier (:mod:`alerts.notifiers`):

- a **firing** alert is sent when that notifier has not had it yet, and again once its resend
  interval has passed since the last delivery (the notifier's ``resend_delay_seconds`` where it
  has one, as Prometheus's ``--rules.alert.resend-delay`` keeps Alertmanager's copy from timing
  out; :data:`DEFAULT_RESEND_SECONDS` otherwise, Alertmanager's default ``repeat_interval``);
- an alert **resolved** at this evaluation is sent once, to the notifiers that had it firing;
  when that request fails it is retried at the next evaluations for up to
  :data:`RESOLVED_RETRY_SECONDS` (Prometheus's 15-minute ``resolvedRetention``), so one lost
  request does not leave it firing in Alertmanager;
- a **silenced** or **inhibited** alert is not sent (it still exists, and the result says why);
- a notifier that fails (``NotificationError`` or anything else) is logged and counted; the
  alerts it did not take are tried again at the next evaluation, and other notifiers and the
  evaluation go on.

A webhook notifier gets one request per group of its ``group_by`` labels
(:func:`alerts.payloads.group_alerts`); Alertmanager groups itself, so it gets one request.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from alerts.model import Alert, AlertState
from alerts.notifiers import Notifier
from alerts.payloads import group_alerts

LOG = logging.getLogger(__name__)
#: Resend interval of a notifier without ``resend_delay_seconds`` (Alertmanager's default
#: ``repeat_interval``: a webhook is a receiver, not an Alertmanager that times alerts out).
DEFAULT_RESEND_SECONDS = 4 * 3600.0
#: How long a resolution whose delivery failed is retried.
RESOLVED_RETRY_SECONDS = 15 * 60.0


class DispatchOutcome(NamedTuple):
    """What one notifier got at one evaluation: the fingerprints sent (firing and resolved),
    and the error text of a failed request (empty when every request succeeded)."""

    notifier: str
    sent: tuple[str, ...]
    error: str


def notifier_name(notifier: Notifier) -> str:
    for attribute in ("receiver", "base_url"):
        value = getattr(notifier, attribute, None)
        if isinstance(value, str) and value:
            return f"{type(notifier).__name__}({value})"
    return type(notifier).__name__


def resend_seconds(notifier: Notifier) -> float:
    value = getattr(notifier, "resend_delay_seconds", None)
    return float(value) if isinstance(value, int | float) and value > 0 else DEFAULT_RESEND_SECONDS


@dataclass
class _Sent:
    """One notifier's memory: fingerprint → when it last took that alert firing."""

    notifier: Notifier
    name: str
    firing_at: dict[str, float] = field(default_factory=dict)
    #: Resolutions not delivered yet (the request failed), retried at later evaluations.
    unsent_resolved: dict[str, Alert] = field(default_factory=dict)
    failures: int = 0


class Dispatcher:
    """Sends each evaluation's alerts to ``notifiers`` by the rules of the module docstring."""

    def __init__(self, notifiers: Iterable[Notifier]) -> None:
        self._sent: list[_Sent] = []
        for notifier in notifiers:
            name = notifier_name(notifier)
            taken = sum(1 for s in self._sent if notifier_name(s.notifier) == name)
            # NOTE: two notifiers to the same place still count their failures apart
            self._sent.append(_Sent(notifier, f"{name} #{taken + 1}" if taken else name))

    @property
    def failures(self) -> dict[str, int]:
        """Failed deliveries per notifier (by name) since this dispatcher was made."""
        return {s.name: s.failures for s in self._sent}

    def dispatch(
        self,
        alerts: Sequence[Alert],
        muted: Mapping[str, object],
        now: float,
    ) -> tuple[DispatchOutcome, ...]:
        """Send ``alerts`` (the firing ones and those resolved at this evaluation; others are
        ignored) minus the ``muted`` fingerprints; one outcome per notifier that had
        something to send or failed."""
        outcomes = []
        for sent in self._sent:
            due = self._due(sent, alerts, muted, now)
            if not due:
                continue
            outcomes.append(self._send(sent, due, now))
        return tuple(outcomes)

    def _due(
        self, sent: _Sent, alerts: Sequence[Alert], muted: Mapping[str, object], now: float
    ) -> list[Alert]:
        interval = resend_seconds(sent.notifier)
        current = {a.fingerprint for a in alerts}
        due = []
        for fingerprint, alert in list(sent.unsent_resolved.items()):
            assert alert.ended_at_seconds is not None
            if fingerprint in current or now - alert.ended_at_seconds > RESOLVED_RETRY_SECONDS:
                del sent.unsent_resolved[fingerprint]  # NOTE: superseded, or given up
            elif fingerprint not in muted:
                due.append(alert)
        for alert in alerts:
            fingerprint = alert.fingerprint
            if fingerprint in muted:
                if alert.state is AlertState.RESOLVED:
                    sent.firing_at.pop(fingerprint, None)
                continue
            if alert.state is AlertState.FIRING:
                last = sent.firing_at.get(fingerprint)
                if last is None or now - last >= interval:
                    due.append(alert)
            elif alert.state is AlertState.RESOLVED and fingerprint in sent.firing_at:
                due.append(alert)
        return due

    def _send(self, sent: _Sent, due: list[Alert], now: float) -> DispatchOutcome:
        name = sent.name
        group_by = getattr(sent.notifier, "group_by", None)
        batches = [g.alerts for g in group_alerts(due, group_by)] if group_by else [tuple(due)]
        delivered: list[str] = []
        errors: list[str] = []
        for batch in batches:
            try:
                sent.notifier.notify(batch, now)
            except Exception as error:  # NOTE: a notifier never stops the evaluation
                sent.failures += 1
                errors.append(str(error))
                for alert in batch:
                    if alert.state is AlertState.RESOLVED:
                        sent.firing_at.pop(alert.fingerprint, None)
                        sent.unsent_resolved[alert.fingerprint] = alert
                LOG.warning("notifier %s failed for %d alert(s): %s", name, len(batch), error)
                continue
            for alert in batch:
                if alert.state is AlertState.FIRING:
                    sent.firing_at[alert.fingerprint] = now
                else:
                    sent.firing_at.pop(alert.fingerprint, None)
                    sent.unsent_resolved.pop(alert.fingerprint, None)
                delivered.append(alert.fingerprint)
        return DispatchOutcome(name, tuple(delivered), "; ".join(errors))
