"""What ``tailwatch alerts list`` and ``alerts silence list`` show: rows gathered from an
:class:`alerts.state.AlertStateStore` at a given time, as plain dicts (the ``--json`` form) and
as rich tables. Pure over the store's reads and ``now_seconds``; times, values and label text
are written as :mod:`alerts.views.display` writes them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text

from alerts.conventions import ALERTNAME, SEVERITY
from alerts.incidents import episode_key
from alerts.matchers import format_matchers
from alerts.model import Alert, AlertState
from alerts.silences import Silence, silenced_by
from alerts.state import AlertStateStore
from alerts.views.display import age, iso, json_value, printable

#: ``--state`` values: an alert state, ``silenced`` (pending or firing alerts an active
#: silence mutes) or ``all``.
STATE_CHOICES = ("all", "firing", "pending", "resolved", "silenced")
#: Transitions read per history call while looking for resolved alerts.
HISTORY_BATCH = 10_000
#: Incidents read to name the incident of each listed alert (open ones come first).
INCIDENT_BATCH = 10_000


@dataclass(frozen=True)
class AlertRow:
    alert: Alert
    silenced_by: tuple[str, ...]
    #: The id of the incident of a firing or resolved alert's episode (None: pending, or an
    #: episode the store has no incident for).
    incident_id: int | None = None

    @property
    def since_seconds(self) -> float:
        """When the alert entered its state (pending: active; firing: started; resolved:
        ended)."""
        alert = self.alert
        if alert.state is AlertState.RESOLVED:
            return alert.ended_at_seconds  # type: ignore[return-value]
        if alert.state is AlertState.FIRING:
            return alert.started_at_seconds  # type: ignore[return-value]
        return alert.active_at_seconds  # type: ignore[return-value]


def alert_rows(
    state: AlertStateStore, now_seconds: float, since_seconds: float, which: str
) -> list[AlertRow]:
    """The active alerts, and those resolved in ``[now - since, now]`` (the last resolve of an
    alert not active again), newest first, filtered by ``which`` (one of STATE_CHOICES)."""
    silences = state.silences()
    active = state.active_alerts()
    active_prints = {a.fingerprint for a in active}
    resolved: dict[str, Alert] = {}
    start = now_seconds - since_seconds
    while True:
        # NOTE: history is oldest first and bounded, so read on from the last time seen; the
        # transitions at that time are read twice, which leaves the same latest per alert.
        batch = state.history(start, now_seconds, limit=HISTORY_BATCH)
        for transition in batch:
            if (
                transition.to_state is AlertState.RESOLVED
                and transition.fingerprint not in active_prints
            ):
                resolved[transition.fingerprint] = transition.alert
        if len(batch) < HISTORY_BATCH or batch[-1].at_seconds == start:
            break
        start = batch[-1].at_seconds
    incident_ids = {
        episode_key(i.alert): i.id
        for i in state.incidents(since_seconds=start, limit=INCIDENT_BATCH)
    }

    def incident_of(alert: Alert) -> int | None:
        if alert.state is AlertState.PENDING:
            return None
        return incident_ids.get(episode_key(alert))

    rows = [
        AlertRow(a, silenced_by(a.labels, silences, now_seconds), incident_of(a)) for a in active
    ]
    rows += [AlertRow(a, (), incident_of(a)) for a in resolved.values()]
    if which == "silenced":
        rows = [r for r in rows if r.silenced_by]
    elif which != "all":
        rows = [r for r in rows if r.alert.state.value == which]
    return sorted(rows, key=lambda r: (-r.since_seconds, r.alert.name, r.alert.fingerprint))


def alert_json(row: AlertRow) -> dict[str, Any]:
    alert = row.alert
    return {
        "fingerprint": alert.fingerprint,
        "alertname": alert.name,
        "state": alert.state.value,
        "labels": alert.labels.as_dict(),
        "annotations": alert.annotations.as_dict(),
        "active_at": iso(alert.active_at_seconds),
        "started_at": iso(alert.started_at_seconds),
        "ended_at": iso(alert.ended_at_seconds),
        "value": json_value(alert.value),
        "generator_url": alert.generator_url,
        "silenced_by": list(row.silenced_by),
        "incident": row.incident_id,
    }


def alerts_table(rows: list[AlertRow], now_seconds: float) -> Table:
    table = Table(title=f"{len(rows)} alert(s) at {iso(now_seconds)}")
    for column in ("alertname", "severity", "state", "labels", "since", "value", "incident"):
        table.add_column(column, overflow="fold")
    for row in rows:
        alert = row.alert
        labels = ", ".join(
            f"{name}={printable(value)}"
            for name, value in alert.labels.pairs
            if name not in (ALERTNAME, SEVERITY)
        )
        state = alert.state.value
        if row.silenced_by:
            state += " (silenced by " + ", ".join(printable(s) for s in row.silenced_by) + ")"
        value = json_value(alert.value)
        table.add_row(
            Text(printable(alert.name)),
            Text(printable(alert.labels.get(SEVERITY, ""))),
            Text(state),
            Text(labels),
            Text(f"{iso(row.since_seconds)} ({age(now_seconds - row.since_seconds)} ago)"),
            Text(
                "-"
                if value is None
                else (f"{value:.6g}" if isinstance(value, float | int) else value)
            ),
            Text("-" if row.incident_id is None else str(row.incident_id)),
        )
    return table


def silence_json(silence: Silence, now_seconds: float) -> dict[str, Any]:
    return {
        "id": silence.id,
        "state": silence.state(now_seconds).value,
        "matchers": format_matchers(silence.matchers),
        "starts_at": iso(silence.starts_at_seconds),
        "ends_at": iso(silence.ends_at_seconds),
        "created_by": silence.created_by,
        "comment": silence.comment,
    }


def silences_table(silences: list[Silence], now_seconds: float) -> Table:
    table = Table(title=f"{len(silences)} silence(s) at {iso(now_seconds)}")
    for column in ("id", "state", "matchers", "starts", "ends", "created by", "comment"):
        table.add_column(column, overflow="fold")
    for silence in silences:
        table.add_row(
            *(
                Text(printable(str(cell)))
                for cell in (
                    silence.id,
                    silence.state(now_seconds).value,
                    format_matchers(silence.matchers),
                    iso(silence.starts_at_seconds),
                    iso(silence.ends_at_seconds),
                    silence.created_by,
                    silence.comment,
                )
            )
        )
    return table
