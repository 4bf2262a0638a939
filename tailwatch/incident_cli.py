"""``tailwatch incident list`` and ``tailwatch incident show ID``: the stored incidents (one
per firing episode of an alert, ``alerts/incidents.py``), and the triage of one over its
window against the baseline just before it: the evidence table, ranked hypotheses, the
slowest requests and the recommended knob, as a terminal report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from alerts.sql import alert_state_of
from alerts.triage import alert_triage_windows, gather, render_text, triage
from alerts.views import (
    LIST_HINT,
    IncidentIdError,
    incident_json,
    incidents_table,
    labels_text,
    parse_incident_id,
)
from collectors.config import ConfigError
from collectors.error_text import first_line
from collectors.replica_targets import replica_targets
from slo.window import format_utc
from tailwatch.cli_options import cli_error, config_path, typer_app
from tailwatch.config import load_config
from tailwatch.store_options import (
    DbOption,
    JsonOption,
    NowOption,
    open_store,
    parse_duration,
    parse_now,
    print_json,
    print_table,
)

incident_app = typer_app(
    name="incident", help="Incidents: list them, triage one by id (see docs/alerts.md)."
)

#: The most incidents one ``incident list`` prints.
MAX_LIMIT = 10_000


def parse_limit(text: str) -> int:
    """``--limit``: a whole number from 1 to :data:`MAX_LIMIT`, or one ``error:`` line."""
    raw = text.strip()
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 6 and 1 <= int(raw) <= MAX_LIMIT):
        raise cli_error(f"--limit {text!r}: must be a whole number from 1 to {MAX_LIMIT}")
    return int(raw)


@incident_app.command("list")
def list_incidents(
    since: Annotated[
        str, typer.Option("--since", help="Also list incidents resolved this long ago or later.")
    ] = "24h",
    limit: Annotated[
        str, typer.Option("--limit", help=f"At most this many (1-{MAX_LIMIT}).")
    ] = "50",
    as_json: JsonOption = False,
    db: DbOption = None,
    now: NowOption = None,
) -> None:
    """List open (firing) incidents, then those resolved in the last --since, newest first."""
    since_seconds = parse_duration("--since", since)
    count = parse_limit(limit)
    at = parse_now(now)
    with open_store(db) as store:
        incidents = alert_state_of(store).incidents(since_seconds=at - since_seconds, limit=count)
    if as_json:
        print_json([incident_json(i) for i in incidents])
    else:
        print_table(incidents_table(incidents, at))


@incident_app.command("show")
def show(
    incident_id: Annotated[
        str, typer.Argument(metavar="ID", help="The incident's id, from `tailwatch incident list`.")
    ],
    db: DbOption = None,
    now: NowOption = None,
    width: Annotated[int, typer.Option(min=40, max=400, help="Report width in columns.")] = 120,
    config: Annotated[
        Path | None,
        typer.Option(help="Configuration file (its alert rules); default: ./tailwatch.yaml."),
    ] = None,
) -> None:
    """Triage incident ID: its window (from the start of the data that first made its
    alert's condition hold, one rule window before it did, to when it resolved, or now)
    against an equal baseline just before it, at least 10 minutes."""
    try:
        wanted = parse_incident_id(incident_id)
    except IncidentIdError as error:
        raise cli_error(str(error)) from None
    path = config_path(config)
    try:
        alerts = load_config(path).alerts
    except ConfigError as error:
        raise cli_error(str(error)) from None
    at = parse_now(now)
    with open_store(db) as store:
        incident = None if wanted is None else alert_state_of(store).incident(wanted)
        if incident is None:
            raise cli_error(f"ID {incident_id!r}: no incident has that id ({LIST_HINT})")
        start = incident.pending_since_seconds
        end = incident.resolved_at_seconds if incident.resolved_at_seconds is not None else at
        window, baseline = alert_triage_windows(
            incident.alert,
            start,
            end,
            alerts.rules,
            scale=alerts.window_scale,
            state=alert_state_of(store),
        )
        mapping = replica_targets(store).unique()
        try:
            data = gather(store, store, window, baseline, replica_targets=mapping)
            report = triage(data)
        except Exception as error:  # NOTE: what the store cannot answer is one line
            raise cli_error(f"cannot triage incident {incident.id}: {first_line(error)}") from None
    typer.echo(
        f"incident {incident.id}: {incident.alertname} ({incident.state}) "
        f"{incident.fingerprint}  {labels_text(incident)}"
    )
    typer.echo(
        f"incident {format_utc(window.start_seconds)} – {format_utc(window.end_seconds)}; "
        f"baseline {format_utc(baseline.start_seconds)} – {format_utc(baseline.end_seconds)}"
    )
    typer.echo(render_text(report, width=width), nl=False)
