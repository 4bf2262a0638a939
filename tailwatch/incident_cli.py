"""``tailwatch incident list`` and ``tailwatch incident show ID``: the stored incidents (one
per firing episode of an alert, ``alerts/incidents.py``), and the triage of one over its
window against the baseline just before it: the evidence table, ranked hypotheses, the
slowest requests and the recommended knob, as a terminal report. ``incident ack ID --by
NAME`` records who is on an open incident (muting nothing); ``incident unack`` undoes it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from alerts import MAX_ACK_BY, MAX_ACK_COMMENT, Acknowledgement, AcknowledgementError
from alerts.sql import alert_state_of
from alerts.triage import alert_triage_windows, gather, render_text, triage
from alerts.views import (
    LIST_HINT,
    IncidentIdError,
    ack_text,
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
            data = gather(store, store, window, baseline, replica_targets=mapping, changes=store)
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
    typer.echo(
        "not acknowledged" if incident.ack is None else f"acknowledged by {ack_text(incident.ack)}"
    )
    typer.echo(render_text(report, width=width), nl=False)


IdArgument = Annotated[
    str, typer.Argument(metavar="ID", help="The incident's id, from `tailwatch incident list`.")
]
#: ``--by`` is required; its default is empty so that leaving it out is the same one
#: ``error:`` line as giving it empty.
ByOption = Annotated[
    str,
    typer.Option("--by", help=f"Who (required): 1-{MAX_ACK_BY} characters, one line."),
]


def _incident_id(text: str) -> int:
    try:
        wanted = parse_incident_id(text)
    except IncidentIdError as error:
        raise cli_error(str(error)) from None
    if wanted is None:
        raise cli_error(f"ID {text!r}: no incident has that id ({LIST_HINT})")
    return wanted


def _ack_error(error: AcknowledgementError) -> typer.Exit:
    """One ``error:`` line: why the incident refuses, or the option at fault."""
    if error.field == "incident":
        return cli_error(error.problem)
    return cli_error(f"--{error.field}: {error.problem}")


@incident_app.command("ack")
def ack(
    incident_id: IdArgument,
    by: ByOption = "",
    comment: Annotated[
        str,
        typer.Option("--comment", help=f"Why, or what you are doing (up to {MAX_ACK_COMMENT})."),
    ] = "",
    db: DbOption = None,
    now: NowOption = None,
) -> None:
    """Acknowledge open incident ID: record who is on it, when, and an optional comment. It
    mutes nothing (a silence does); acknowledging again replaces who and when; a resolved
    incident cannot be acknowledged."""
    wanted = _incident_id(incident_id)
    at = parse_now(now)
    try:
        acknowledgement = Acknowledgement.create(by, at, comment)
    except AcknowledgementError as error:
        raise _ack_error(error) from None
    with open_store(db) as store:
        try:
            before = alert_state_of(store).acknowledge(wanted, acknowledgement)
        except AcknowledgementError as error:
            raise _ack_error(error) from None
    typer.echo(f"incident {wanted} acknowledged by {ack_text(acknowledgement)}")
    if before is not None:
        typer.echo(f"updated: it was acknowledged by {ack_text(before)}")


@incident_app.command("unack")
def unack(
    incident_id: IdArgument,
    by: ByOption = "",
    db: DbOption = None,
    now: NowOption = None,
) -> None:
    """Undo open incident ID's acknowledgement (nobody is on it any more)."""
    wanted = _incident_id(incident_id)
    at = parse_now(now)
    try:
        who = Acknowledgement.create(by, at)
    except AcknowledgementError as error:
        raise _ack_error(error) from None
    with open_store(db) as store:
        try:
            before = alert_state_of(store).unacknowledge(wanted)
        except AcknowledgementError as error:
            raise _ack_error(error) from None
    typer.echo(f"incident {wanted} unacknowledged by {ack_text(who)}")
    typer.echo(f"it was acknowledged by {ack_text(before)}")
