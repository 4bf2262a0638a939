"""What ``tailwatch alerts`` and ``tailwatch incident`` print and the console shows of alerts,
incidents and rule errors: rows and text, pure functions of what the store holds."""

from alerts.views.alerts import (
    STATE_CHOICES,
    alert_json,
    alert_rows,
    alerts_table,
    silence_json,
    silences_table,
)
from alerts.views.changes import (
    KIND_CHOICES,
    change_json,
    change_row,
    changes_table,
    newest_changes,
)
from alerts.views.display import age, iso
from alerts.views.incidents import (
    LIST_HINT,
    IncidentIdError,
    ack_json,
    ack_text,
    incident_json,
    incidents_table,
    labels_text,
    parse_incident_id,
)
from alerts.views.rule_errors import (
    STALE_EVALUATION_SECONDS,
    health_json,
    health_table,
    health_warnings,
)

__all__ = [
    "KIND_CHOICES",
    "LIST_HINT",
    "STALE_EVALUATION_SECONDS",
    "STATE_CHOICES",
    "IncidentIdError",
    "ack_json",
    "ack_text",
    "age",
    "alert_json",
    "alert_rows",
    "alerts_table",
    "change_json",
    "change_row",
    "changes_table",
    "health_json",
    "health_table",
    "health_warnings",
    "incident_json",
    "incidents_table",
    "iso",
    "labels_text",
    "newest_changes",
    "parse_incident_id",
    "silence_json",
    "silences_table",
]
