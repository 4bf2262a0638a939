"""The JSON bodies the notifiers send, built as pure functions of the alerts and the time.

- :func:`webhook_message`: Alertmanager's webhook payload, version ``"4"``
  (``notify/webhook/webhook.go`` ``Message``, ``template/template.go`` ``Data``), so a receiver
  written for Alertmanager's webhooks reads Tailwatch's unchanged.
- :func:`postable_alerts`: the body of Alertmanager's ``POST /api/v2/alerts``
  (``api/v2/openapi.yaml`` ``postableAlerts``), shaped as Prometheus sends it.
- :func:`postable_silence`: the body of ``POST /api/v2/silences``.

Only firing and resolved alerts are sent; a pending or inactive one is an error (Prometheus
never sends pending alerts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from alerts.errors import AlertError
from alerts.labels import LabelSet
from alerts.matchers import MatchType
from alerts.model import Alert, AlertState
from alerts.silences import Silence
from slo.window import format_utc

#: The webhook payload format version Alertmanager 0.25 sends.
WEBHOOK_VERSION = "4"
#: Go's zero ``time.Time`` in RFC 3339: Alertmanager's ``endsAt`` of a firing alert whose end is
#: not known.
GO_ZERO_TIME = "0001-01-01T00:00:00Z"
#: Prometheus's default ``--rules.alert.resend-delay``.
DEFAULT_RESEND_DELAY_SECONDS = 60.0
#: How long Prometheus keeps re-sending a resolved alert (``rules/alerting.go``
#: ``resolvedRetention``), so one lost request does not leave it firing in Alertmanager.
RESOLVED_RETENTION_SECONDS = 15 * 60.0


def _sendable(alerts: Iterable[Alert]) -> list[Alert]:
    alerts = list(alerts)
    for alert in alerts:
        if alert.state not in (AlertState.FIRING, AlertState.RESOLVED):
            raise AlertError(
                "state",
                f"alert {alert.name!r} ({alert.fingerprint}) is {alert.state.value}; only firing "
                "and resolved alerts are sent",
            )
    return alerts


def _rfc3339(seconds: float | None) -> str:
    """RFC 3339 UTC to the millisecond; a sent alert always has the time (checked by the
    model for its state)."""
    assert seconds is not None
    return format_utc(seconds)


def _common(mappings: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """The pairs every mapping shares (Alertmanager's commonLabels/commonAnnotations)."""
    if not mappings:
        return {}
    common = dict(mappings[0])
    for mapping in mappings[1:]:
        common = {k: v for k, v in common.items() if mapping.get(k) == v}
    return common


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def group_key(group_labels: Mapping[str, str], route_key: str = "{}") -> str:
    """Alertmanager's group key, ``<route key>:<group labels>`` (``dispatch.go``), e.g.
    ``{}:{alertname="KVSaturation", slo="ttft"}`` for the root route."""
    inner = ", ".join(f"{name}={_quote(group_labels[name])}" for name in sorted(group_labels))
    return f"{route_key}:{{{inner}}}"


class AlertGroup(NamedTuple):
    """Alerts that share the values of the ``group_by`` labels (``labels``)."""

    labels: LabelSet
    alerts: tuple[Alert, ...]


#: The group label of alerts grouped by their incident (``alerts.grouping``).
INCIDENT_GROUP = "incident"


def _group_labels(alert: Alert, group_by: Sequence[str]) -> LabelSet:
    # NOTE: an alert triage explained belongs to its incident's group, whatever its name:
    # one cause, one notification group (its key stays the opener's fingerprint)
    if alert.cause and alert.incident_group:
        return LabelSet({INCIDENT_GROUP: alert.incident_group})
    return LabelSet({n: alert.labels[n] for n in group_by if n in alert.labels})


def group_alerts(alerts: Iterable[Alert], group_by: Sequence[str]) -> tuple[AlertGroup, ...]:
    """Split ``alerts`` as Alertmanager's dispatcher does (``dispatch.go`` ``getGroupLabels``):
    an alert's group labels are those of ``group_by`` it has; alerts with equal group labels
    form one group, one notification. An alert triage explained when it fired is grouped by
    its incident instead (``incident``: the opener's fingerprint), so the alerts of one cause
    are one group under one key. Groups come in :func:`group_key` order, alerts in their
    given order."""
    groups: dict[LabelSet, list[Alert]] = {}
    for alert in alerts:
        groups.setdefault(_group_labels(alert, group_by), []).append(alert)
    return tuple(
        AlertGroup(labels, tuple(members))
        for labels, members in sorted(groups.items(), key=lambda item: group_key(item[0]))
    )


def webhook_message(
    alerts: Sequence[Alert],
    receiver: str,
    group_by: Sequence[str] = ("alertname",),
    external_url: str = "",
    max_alerts: int = 0,
) -> dict[str, Any]:
    """The version-4 webhook payload for one group of alerts.

    ``max_alerts`` (0: no limit) keeps the first ``max_alerts`` alerts and counts the rest in
    ``truncatedAlerts``, as Alertmanager's ``max_alerts`` does (before anything else is
    computed, so ``status`` and the common labels describe the alerts sent).

    ``groupLabels`` are the ``group_by`` labels the alerts share; ``status`` is ``firing`` if
    any alert fires, else ``resolved``. A firing alert's ``endsAt`` is Go's zero time, as
    Alertmanager shows an alert whose end is not known; a resolved one's is its
    ``ended_at_seconds``."""
    alerts = _sendable(alerts)
    if not alerts:
        raise AlertError("alerts", "a webhook notification needs at least one alert")
    truncated = 0
    if max_alerts and len(alerts) > max_alerts:
        alerts, truncated = alerts[:max_alerts], len(alerts) - max_alerts
    common_labels = _common([a.labels for a in alerts])
    group_labels = {name: common_labels[name] for name in group_by if name in common_labels}
    incidents = {a.incident_group for a in alerts if a.cause and a.incident_group}
    if len(incidents) == 1 and all(a.cause for a in alerts):
        group_labels = {INCIDENT_GROUP: incidents.pop()}
    return {
        "version": WEBHOOK_VERSION,
        "groupKey": group_key(group_labels),
        "truncatedAlerts": truncated,
        "status": "firing" if any(a.is_firing for a in alerts) else "resolved",
        "receiver": receiver,
        "groupLabels": group_labels,
        "commonLabels": common_labels,
        "commonAnnotations": _common([a.annotations for a in alerts]),
        "externalURL": external_url,
        "alerts": [
            {
                "status": "firing" if alert.is_firing else "resolved",
                "labels": alert.labels.as_dict(),
                "annotations": _annotations(alert),
                "startsAt": _rfc3339(alert.started_at_seconds),
                "endsAt": GO_ZERO_TIME if alert.is_firing else _rfc3339(alert.ended_at_seconds),
                "generatorURL": alert.generator_url,
                "fingerprint": alert.fingerprint,
            }
            for alert in alerts
        ],
    }


def _annotations(alert: Alert) -> dict[str, str]:
    """The alert's annotations, with triage's cause at firing (``cause``) when it has one."""
    out = alert.annotations.as_dict()
    if alert.cause:
        scope = alert.cause_scope
        out.setdefault(
            "cause", alert.cause if scope in ("", "fleet") else f"{alert.cause} on {scope}"
        )
    return out


def postable_silence(silence: Silence) -> dict[str, Any]:
    """The body of Alertmanager's ``POST /api/v2/silences`` for ``silence`` (the
    ``postableSilence`` schema; Alertmanager assigns its own id, so ours is not sent)."""
    return {
        "matchers": [
            {
                "name": m.name,
                "value": m.value,
                "isRegex": m.type in (MatchType.REGEX, MatchType.NOT_REGEX),
                "isEqual": m.type in (MatchType.EQUAL, MatchType.REGEX),
            }
            for m in silence.matchers
        ],
        "startsAt": _rfc3339(silence.starts_at_seconds),
        "endsAt": _rfc3339(silence.ends_at_seconds),
        "createdBy": silence.created_by,
        "comment": silence.comment,
    }


def valid_until_seconds(
    now_seconds: float,
    evaluation_interval_seconds: float,
    resend_delay_seconds: float = DEFAULT_RESEND_DELAY_SECONDS,
) -> float:
    """Prometheus's ``ValidUntil`` for a firing alert sent at ``now_seconds``:
    ``now + 4 × max(evaluation interval, resend delay)`` (``rules/alerting.go``
    ``sendAlerts``: "allow for two Eval or Alertmanager send failures"). Alertmanager resolves
    the alert by itself at that time unless it is re-sent first."""
    return now_seconds + 4 * max(evaluation_interval_seconds, resend_delay_seconds)


def postable_alerts(
    alerts: Sequence[Alert],
    now_seconds: float,
    evaluation_interval_seconds: float,
    resend_delay_seconds: float = DEFAULT_RESEND_DELAY_SECONDS,
) -> list[dict[str, Any]]:
    """The ``POST /api/v2/alerts`` body: ``startsAt`` is when the alert began firing;
    ``endsAt`` is its resolve time when resolved, else :func:`valid_until_seconds` (so a
    firing alert must be re-sent before then, as Prometheus does every resend delay).
    ``generatorURL`` is left out when empty (the API wants a URI)."""
    body = []
    for alert in _sendable(alerts):
        ends_at = (
            valid_until_seconds(now_seconds, evaluation_interval_seconds, resend_delay_seconds)
            if alert.is_firing
            else alert.ended_at_seconds
        )
        item: dict[str, Any] = {
            "labels": alert.labels.as_dict(),
            "annotations": alert.annotations.as_dict(),
            "startsAt": _rfc3339(alert.started_at_seconds),
            "endsAt": _rfc3339(ends_at),
        }
        if alert.generator_url:
            item["generatorURL"] = alert.generator_url
        body.append(item)
    return body
