"""Label names and values the alerts package gives meaning to, in one place."""

from __future__ import annotations

#: The alert's name; every alert carries it (Prometheus sets it from the rule's ``alert:``).
ALERTNAME = "alertname"
#: How urgently a human must look: :data:`SEVERITY_PAGE` wakes someone, :data:`SEVERITY_TICKET`
#: waits for working hours (the SRE Workbook's split, as in ``slo/budget.py``'s tables).
SEVERITY = "severity"
SEVERITY_PAGE = "page"
SEVERITY_TICKET = "ticket"
#: The SLO an alert is about (its ``slos:`` name).
SLO = "slo"

#: Annotation names the notifiers and triage read.
SUMMARY = "summary"
DESCRIPTION = "description"
RUNBOOK = "runbook"
