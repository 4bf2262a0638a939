"""The notification step after each evaluation: which alerts go to which notifier.

Per notifier (:mod:`alerts.notify.notifiers`):

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
(:func:`alerts.notify.payloads.group_alerts`); Alertmanager groups itself, so it gets one request.

What each notifier has had (the firing alerts it took and when, the resolutions still to
retry) is kept in a :class:`NotifiedMemory` (the alert state store) when one is given: a
restarted dispatcher resumes it, so it neither sends every firing alert again (a webhook
would page twice) nor forgets to send the resolution of an alert it had firing before the
restart. A notifier is known there by :func:`notifier_key` (its kind, name and a digest of
its destination URL): a notifier pointed elsewhere starts with nothing sent. The memory is
saved after each dispatch that changed it; a crash between a delivery and that save sends the
delivery once more (at least once, never lost).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from alerts.model import Alert, AlertState
from alerts.notify.notifiers import Notifier
from alerts.notify.payloads import group_alerts
from alerts.transitions import Notified

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
    return (
        f"{type(notifier).__name__}({notifier.label})"
        if notifier.label
        else type(notifier).__name__
    )


def notifier_key(notifier: Notifier) -> str:
    """How the stored memory names ``notifier``: its :func:`notifier_name` and a digest of its
    kind, destination (the full URL, which may hold credentials and so is never stored) and
    receiver, so a notifier pointed elsewhere has had nothing."""
    identity = "\x00".join((type(notifier).__name__, notifier.destination, notifier.receiver))
    digest = hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    # NOTE: printable ASCII only, so the key reads back from any database exactly as made
    shown = "".join(c if " " <= c <= "~" else "?" for c in notifier_name(notifier)[:200])
    return f"{shown} {digest}"


class NotifiedMemory(Protocol):
    """Where a dispatcher keeps what each notifier has had (an ``AlertStateStore`` is one)."""

    def notified(self) -> list[Notified]: ...

    def save_notified(self, notifier: str, records: Sequence[Notified]) -> None: ...


def resend_seconds(notifier: Notifier) -> float:
    value = notifier.resend_delay_seconds
    return float(value) if value is not None and value > 0 else DEFAULT_RESEND_SECONDS


class _Had(NamedTuple):
    """A firing alert a notifier took, and when it last did."""

    at_seconds: float
    alert: Alert


@dataclass
class _Sent:
    """One notifier's memory: fingerprint → when it last took that alert firing."""

    notifier: Notifier
    name: str
    key: str
    firing: dict[str, _Had] = field(default_factory=dict)
    #: Resolutions not delivered yet (the request failed), retried at later evaluations.
    unsent_resolved: dict[str, Alert] = field(default_factory=dict)
    failures: int = 0
    #: The memory changed since it was last saved.
    is_dirty: bool = False

    def records(self) -> list[Notified]:
        firing = [
            Notified(self.key, fp, AlertState.FIRING, had.at_seconds, had.alert)
            for fp, had in self.firing.items()
        ]
        resolved = [
            Notified(self.key, fp, AlertState.RESOLVED, alert.ended_at_seconds, alert)  # type: ignore[arg-type]
            for fp, alert in self.unsent_resolved.items()
        ]
        return firing + resolved

    def restore(self, records: Iterable[Notified]) -> None:
        for record in records:
            if record.state is AlertState.FIRING:
                self.firing[record.fingerprint] = _Had(record.at_seconds, record.alert)
            elif record.state is AlertState.RESOLVED:
                self.unsent_resolved[record.fingerprint] = record.alert


class Dispatcher:
    """Sends each evaluation's alerts to ``notifiers`` by the rules of the module docstring;
    ``memory`` (optional) keeps what each has had across restarts."""

    def __init__(self, notifiers: Iterable[Notifier], memory: NotifiedMemory | None = None) -> None:
        self._sent: list[_Sent] = []
        self._memory = memory
        for notifier in notifiers:
            name, key = notifier_name(notifier), notifier_key(notifier)
            taken = sum(1 for s in self._sent if notifier_name(s.notifier) == name)
            same = sum(1 for s in self._sent if notifier_key(s.notifier) == key)
            # NOTE: two notifiers to the same place still count their failures apart
            self._sent.append(
                _Sent(
                    notifier,
                    f"{name} #{taken + 1}" if taken else name,
                    f"{key} #{same + 1}" if same else key,
                )
            )
        if memory is not None:
            stored = memory.notified()
            for sent in self._sent:
                sent.restore(r for r in stored if r.notifier == sent.key)

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
            before = (dict(sent.firing), dict(sent.unsent_resolved))
            due = self._due(sent, alerts, muted, now)
            if due:
                outcomes.append(self._send(sent, due, now))
            sent.is_dirty |= before != (sent.firing, sent.unsent_resolved)
            self._save(sent)
        return tuple(outcomes)

    def _save(self, sent: _Sent) -> None:
        if self._memory is None or not sent.is_dirty:
            return
        try:
            self._memory.save_notified(sent.key, sent.records())
        except Exception as error:  # NOTE: kept in memory and saved at the next dispatch
            LOG.warning("cannot save what notifier %s has had: %s", sent.name, error)
            return
        sent.is_dirty = False

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
                    sent.firing.pop(fingerprint, None)
                continue
            if alert.state is AlertState.FIRING:
                last = sent.firing.get(fingerprint)
                if last is None or now - last.at_seconds >= interval:
                    due.append(alert)
            elif alert.state is AlertState.RESOLVED and fingerprint in sent.firing:
                due.append(alert)
        return due

    def _send(self, sent: _Sent, due: list[Alert], now: float) -> DispatchOutcome:
        name = sent.name
        group_by = sent.notifier.group_by
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
                        sent.firing.pop(alert.fingerprint, None)
                        sent.unsent_resolved[alert.fingerprint] = alert
                LOG.warning("notifier %s failed for %d alert(s): %s", name, len(batch), error)
                continue
            for alert in batch:
                if alert.state is AlertState.FIRING:
                    sent.firing[alert.fingerprint] = _Had(now, alert)
                else:
                    sent.firing.pop(alert.fingerprint, None)
                    sent.unsent_resolved.pop(alert.fingerprint, None)
                delivered.append(alert.fingerprint)
        return DispatchOutcome(name, tuple(delivered), "; ".join(errors))
