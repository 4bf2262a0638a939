"""``tailwatch incident show ID``: triage of one stored alert (ID: its fingerprint, or a unique
prefix of it) over its window against the baseline just before it: the evidence table, ranked
hypotheses, the slowest requests and the recommended knob, as a terminal report."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated

import typer

from tailwatch.alerts_cli import DbOption, NowOption, first_line, open_store, parse_now
from tailwatch.cli_options import cli_error, typer_app

if TYPE_CHECKING:
    from alerts.model import Alert

incident_app = typer_app(
    name="incident", help="Incidents: triage a stored alert's window (see docs/alerts.md)."
)


@incident_app.command("show")
def show(
    incident_id: Annotated[
        str, typer.Argument(metavar="ID", help="The alert's fingerprint, or a unique prefix.")
    ],
    db: DbOption = None,
    now: NowOption = None,
    width: Annotated[int, typer.Option(min=40, max=400, help="Report width in columns.")] = 120,
) -> None:
    """Triage the stored alert ID: its window (from when its condition first held to when it
    resolved, or now) against an equal baseline just before it, at least 10 minutes."""
    from alerts.gather import gather
    from alerts.triage import triage
    from alerts.triage_report import render_text
    from alerts.triage_windows import triage_windows
    from collectors.replica_targets import replica_targets
    from slo.window import format_utc

    wanted = incident_id.strip().lower()
    if not wanted or any(ch not in "0123456789abcdef" for ch in wanted):
        raise cli_error(f"ID {incident_id!r}: expected an alert fingerprint (hex digits)")
    at = parse_now(now)
    with open_store(db) as store:
        alert = _find(store.alert_state, wanted, at)
        start = alert.active_at_seconds if alert.active_at_seconds is not None else at
        end = alert.ended_at_seconds if alert.ended_at_seconds is not None else at
        incident, baseline = triage_windows(start, end)
        join = replica_targets(store)
        mapping = {r: next(iter(ts)) for r, ts in join.targets_by_replica.items() if len(ts) == 1}
        try:
            data = gather(store, store, incident, baseline, replica_targets=mapping)
            report = triage(data)
        except Exception as error:  # NOTE: what the store cannot answer is one line
            raise cli_error(f"cannot triage {alert.fingerprint}: {first_line(error)}") from None
    labels = ", ".join(f"{k}={v}" for k, v in sorted(alert.labels.items()) if k != "alertname")
    typer.echo(f"{alert.name} ({alert.state.value}) {alert.fingerprint}  {labels}")
    typer.echo(
        f"incident {format_utc(incident.start_seconds)} – {format_utc(incident.end_seconds)}; "
        f"baseline {format_utc(baseline.start_seconds)} – {format_utc(baseline.end_seconds)}"
    )
    typer.echo(render_text(report, width=width), nl=False)


def _find(state: object, wanted: str, at: float) -> Alert:
    """The latest saved version of the one alert whose fingerprint starts with ``wanted``."""
    from alerts.state import AlertStateStore

    assert isinstance(state, AlertStateStore)
    versions: dict[str, Alert] = {a.fingerprint: a for a in state.active_alerts()}
    for transition in state.history(0.0, at):
        current = versions.get(transition.fingerprint)
        if current is None or _latest(transition.alert) > _latest(current):
            versions[transition.fingerprint] = transition.alert
    matches = sorted(fp for fp in versions if fp.startswith(wanted))
    if not matches:
        raise cli_error(f"ID {wanted!r}: no stored alert has that fingerprint")
    if len(matches) > 1:
        shown = ", ".join(matches[:5]) + (", …" if len(matches) > 5 else "")
        raise cli_error(f"ID {wanted!r}: matches {len(matches)} alerts ({shown}); give more digits")
    return versions[matches[0]]


def _latest(alert: Alert) -> float:
    times = (alert.active_at_seconds, alert.started_at_seconds, alert.ended_at_seconds)
    return max((t for t in times if t is not None), default=-math.inf)
