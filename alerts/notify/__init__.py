"""Notifications: the webhook and Alertmanager notifiers, their JSON bodies, retries, and the
dispatcher that decides which alert goes to which notifier and when it is sent again."""

from alerts.notify.dispatch import notifier_key
from alerts.notify.notifiers import Delivery, WebhookNotifier
from alerts.notify.payloads import GO_ZERO_TIME, group_alerts, group_key, webhook_message

__all__ = [
    "GO_ZERO_TIME",
    "Delivery",
    "WebhookNotifier",
    "group_alerts",
    "group_key",
    "notifier_key",
    "webhook_message",
]
