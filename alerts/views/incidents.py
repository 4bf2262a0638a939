"""What ``tailwatch incident list`` shows: incidents (:class:`alerts.incidents.Incident`) as
plain dicts (the ``--json`` form) and as a rich table; and how an incident id typed by a
person is read. Pure over the records and ``now_seconds``."""

from __future__ import annotations

import re
from typing import Any

from rich.table import Table
from rich.text import Text

from alerts.conventions import ALERTNAME, SEVERITY
from alerts.incidents import Acknowledgement, Incident, opener_of
from alerts.views.display import age, iso, json_value, printable

#: An incident id as typed: digits, optionally after ``#`` (as the list shows them).
_ID = re.compile(r"#?([0-9]+)")
#: More digits than any id has (2**63 - 1 has 19): such an input is no incident's.
_MAX_DIGITS = 19
LIST_HINT = "see `tailwatch incident list`"


class IncidentIdError(ValueError):
    """An incident id that is not a number."""


def parse_incident_id(text: str) -> int | None:
    """``text`` (``12`` or ``#12``, spaces around ignored) as an id; ``None`` for a number no
    incident can have (too many digits); :class:`IncidentIdError` when it is not a number."""
    found = _ID.fullmatch(text.strip())
    if found is None:
        raise IncidentIdError(
            f"ID {text!r}: expected an incident id, a number such as 12 ({LIST_HINT})"
        )
    digits = found.group(1).lstrip("0") or "0"
    return None if len(digits) > _MAX_DIGITS else int(digits)


def incident_json(incident: Incident) -> dict[str, Any]:
    return {
        "id": incident.id,
        "fingerprint": incident.fingerprint,
        "alertname": incident.alertname,
        "severity": incident.severity,
        "state": incident.state,
        "labels": incident.labels.as_dict(),
        "annotations": incident.annotations.as_dict(),
        "summary": incident.summary,
        "pending_since": iso(incident.pending_since_seconds),
        "started_at": iso(incident.started_at_seconds),
        "resolved_at": iso(incident.resolved_at_seconds),
        "value": json_value(incident.value),
        "cause": incident.alert.cause,
        "cause_scope": incident.alert.cause_scope,
        "incident_group": incident.alert.incident_group,
        "acknowledged": ack_json(incident.ack),
    }


def ack_json(ack: Acknowledgement | None) -> dict[str, Any] | None:
    """Who acknowledged, when (ISO 8601 UTC) and why; ``None`` when nobody has."""
    if ack is None:
        return None
    return {"by": ack.by, "at": iso(ack.at_seconds), "comment": ack.comment}


def ack_text(ack: Acknowledgement | None) -> str:
    """``alice at 2027-01-15T08:05:00Z: looking at KV`` (the comment only when given);
    ``-`` when nobody has acknowledged it. Text shown as :func:`printable`."""
    if ack is None:
        return "-"
    comment = f": {ack.comment}" if ack.comment else ""
    return printable(f"{ack.by} at {iso(ack.at_seconds)}{comment}")


def labels_text(incident: Incident) -> str:
    return ", ".join(
        f"{name}={printable(value)}"
        for name, value in incident.labels.pairs
        if name not in (ALERTNAME, SEVERITY)
    )


def cause_text(incident: Incident, incidents: list[Incident]) -> str:
    """Triage's cause at firing, and for a symptom the incident it joined (``→ #12``)."""
    opener = opener_of(incident, incidents)
    joined = "" if opener is None else f" → #{opener.id}"
    return (incident.cause or "-") + joined


def incidents_table(incidents: list[Incident], now_seconds: float) -> Table:
    openers = sum(not i.is_symptom for i in incidents)
    table = Table(
        title=f"{len(incidents)} incident(s) at {iso(now_seconds)}, "
        f"{openers} opened by a cause of their own (→ #N: a symptom that joined #N)"
    )
    for column in (
        "id",
        "state",
        "alertname",
        "severity",
        "labels",
        "cause",
        "started",
        "resolved",
        "acknowledged",
    ):
        table.add_column(column, overflow="fold")
    table.add_column("value", overflow="fold")
    table.add_column("summary", overflow="fold")
    for incident in incidents:
        started = incident.started_at_seconds
        resolved = incident.resolved_at_seconds
        value = json_value(incident.value)
        table.add_row(
            Text(str(incident.id)),
            Text(incident.state),
            Text(printable(incident.alertname)),
            Text(printable(incident.severity)),
            Text(labels_text(incident)),
            Text(printable(cause_text(incident, incidents))),
            Text(f"{iso(started)} ({age(now_seconds - started)} ago)"),
            Text(
                "-" if resolved is None else f"{iso(resolved)} (lasted {age(resolved - started)})"
            ),
            Text(ack_text(incident.ack)),
            Text(
                "-"
                if value is None
                else (f"{value:.6g}" if isinstance(value, float | int) else value)
            ),
            Text(printable(incident.summary)),
        )
    return table
