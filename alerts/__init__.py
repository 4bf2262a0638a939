"""Tailwatch's alerting: the alert model, Alertmanager's label matchers, silences, inhibition,
and notifiers (webhook, Alertmanager v2). Everything but :mod:`alerts.notify.notifiers` is pure logic
on plain data. See ``docs/alerts.md``.
"""

from alerts.errors import (
    AlertError,
    AlertsError,
    InhibitRuleError,
    LabelError,
    MatcherError,
    NotificationError,
    NotifierConfigError,
    SilenceError,
)
from alerts.inhibition import DEFAULT_INHIBIT_RULES, InhibitRule, inhibited_alerts, inhibited_by
from alerts.labels import LabelSet, fingerprint, fingerprint_hex
from alerts.matchers import (
    Matcher,
    MatchType,
    format_matchers,
    matches_all,
    parse_matcher,
    parse_matchers,
)
from alerts.model import Alert, AlertState, unique_by_fingerprint
from alerts.notify.notifiers import AlertmanagerNotifier, Delivery, Notifier, WebhookNotifier
from alerts.notify.payloads import (
    AlertGroup,
    group_alerts,
    group_key,
    postable_alerts,
    postable_silence,
    valid_until_seconds,
    webhook_message,
)
from alerts.notify.retry import RetryPolicy, is_retryable_status
from alerts.silences import Silence, SilenceState, silenced_alerts, silenced_by

__all__ = [
    "DEFAULT_INHIBIT_RULES",
    "Alert",
    "AlertError",
    "AlertGroup",
    "AlertState",
    "AlertmanagerNotifier",
    "AlertsError",
    "Delivery",
    "InhibitRule",
    "InhibitRuleError",
    "LabelError",
    "LabelSet",
    "MatchType",
    "Matcher",
    "MatcherError",
    "NotificationError",
    "Notifier",
    "NotifierConfigError",
    "RetryPolicy",
    "Silence",
    "SilenceError",
    "SilenceState",
    "WebhookNotifier",
    "fingerprint",
    "fingerprint_hex",
    "format_matchers",
    "group_alerts",
    "group_key",
    "inhibited_alerts",
    "inhibited_by",
    "is_retryable_status",
    "matches_all",
    "parse_matcher",
    "parse_matchers",
    "postable_alerts",
    "postable_silence",
    "silenced_alerts",
    "silenced_by",
    "unique_by_fingerprint",
    "valid_until_seconds",
    "webhook_message",
]
