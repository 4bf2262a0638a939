"""What ``tailwatch alerts`` and ``tailwatch incident`` print and the console shows of alerts,
incidents and rule errors: rows and text, pure functions of what the store holds."""

from alerts.views.display import age
from alerts.views.incidents import IncidentIdError, parse_incident_id
from alerts.views.rule_errors import STALE_EVALUATION_SECONDS

__all__ = ["STALE_EVALUATION_SECONDS", "IncidentIdError", "age", "parse_incident_id"]
