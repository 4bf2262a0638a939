"""Notifications: the webhook and Alertmanager notifiers, their JSON bodies, retries, and the
dispatcher that decides which alert goes to which notifier and when it is sent again."""
