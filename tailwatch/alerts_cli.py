"""``tailwatch alerts list`` and ``tailwatch alerts silence add|list|expire``: the alert states,
history and silences the evaluator keeps in the store (``alerts.sql.alert_state_of(store)``). Options and
store access only; the rows are built in :mod:`alerts.views.alerts`, the semantics are
``alerts/``'s. ``tailwatch alerts run`` is in :mod:`tailwatch.alerts_run`; the options the
commands that read the store share, and how they open it, are in :mod:`tailwatch.store_options`."""

from __future__ import annotations

from typing import Annotated

import typer

from alerts import AlertsError, Silence, SilenceState
from alerts.sql import alert_state_of
from alerts.views import (
    STATE_CHOICES,
    alert_json,
    alert_rows,
    alerts_table,
    health_json,
    health_table,
    health_warnings,
    iso,
    silence_json,
    silences_table,
)
from tailwatch.alerts_run import run
from tailwatch.cli_options import cli_error, typer_app
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

alerts_app = typer_app(
    name="alerts", help="Alerts in the store: list them, silence them (see docs/alerts.md)."
)
silence_app = typer_app(name="silence", help="Silences: add, list and expire them.")
alerts_app.add_typer(silence_app, name="silence")


@alerts_app.command("list")
def list_alerts(
    state: Annotated[
        str,
        typer.Option(
            "--state",
            help="firing, pending, resolved, silenced (muted by an active silence) or all.",
        ),
    ] = "all",
    since: Annotated[
        str, typer.Option("--since", help="Show alerts resolved this long ago or later.")
    ] = "1h",
    as_json: JsonOption = False,
    db: DbOption = None,
    now: NowOption = None,
) -> None:
    """List pending and firing alerts, and those resolved recently, newest first."""
    if state not in STATE_CHOICES:
        raise cli_error(f"--state {state!r}: must be one of {', '.join(STATE_CHOICES)}")
    since_seconds = parse_duration("--since", since)
    at = parse_now(now)
    with open_store(db) as store:
        rows = alert_rows(alert_state_of(store), at, since_seconds, state)
        health = alert_state_of(store).evaluation_health()
    if as_json:
        print_json([alert_json(row) for row in rows])
    else:
        print_table(alerts_table(rows, at))

    for line in health_warnings(health, at):
        typer.echo(line, err=True)


@alerts_app.command("errors")
def list_errors(as_json: JsonOption = False, db: DbOption = None, now: NowOption = None) -> None:
    """List the rules that failed to evaluate: the latest error of each, when, and how many
    times; `failing` when it failed at the last evaluation (its alerts are stuck)."""
    at = parse_now(now)
    with open_store(db) as store:
        health = alert_state_of(store).evaluation_health()
    if as_json:
        print_json(health_json(health))
    else:
        print_table(health_table(health, at))


@silence_app.command("add")
def add_silence(
    matchers: Annotated[
        str,
        typer.Option(
            "--matchers", help="Alertmanager matchers, e.g. '{alertname=\"KVSaturation\"}'."
        ),
    ],
    author: Annotated[str, typer.Option("--author", help="Who silences the alerts.")],
    comment: Annotated[str, typer.Option("--comment", help="Why they are silenced.")],
    duration: Annotated[
        str, typer.Option("--duration", help="How long, from now: 30m, 2h, 1d.")
    ] = "1h",
    db: DbOption = None,
    now: NowOption = None,
) -> None:
    """Add a silence starting now; prints its id."""
    seconds = parse_duration("--duration", duration)
    at = parse_now(now)
    try:
        silence = Silence.create(
            matchers,
            starts_at_seconds=at,
            ends_at_seconds=at + seconds,
            created_by=author,
            comment=comment,
            now_seconds=at,
        )
    except AlertsError as error:
        flag = {"created_by": "--author", "comment": "--comment"}.get(
            getattr(error, "field", ""), "--matchers"
        )
        raise cli_error(f"{flag}: {error}") from None
    with open_store(db) as store:
        alert_state_of(store).save_silence(silence)
    typer.echo(silence.id)


@silence_app.command("list")
def list_silences(as_json: JsonOption = False, db: DbOption = None, now: NowOption = None) -> None:
    """List every silence (pending, active and expired) with its state now."""
    at = parse_now(now)
    with open_store(db) as store:
        silences = alert_state_of(store).silences()
    if as_json:
        print_json([silence_json(s, at) for s in silences])
    else:
        print_table(silences_table(silences, at))


@silence_app.command("expire")
def expire_silence(
    silence_id: Annotated[str, typer.Argument(metavar="ID", help="The silence's id.")],
    db: DbOption = None,
    now: NowOption = None,
) -> None:
    """End a silence now (a pending one never starts)."""
    at = parse_now(now)
    with open_store(db) as store:
        state = alert_state_of(store)
        found = [s for s in state.silences() if s.id == silence_id]
        if not found:
            raise cli_error(
                f"silence {silence_id!r}: no such silence (see `tailwatch alerts silence list`)"
            )
        silence = found[0]
        if silence.state(at) is SilenceState.EXPIRED:
            typer.echo(
                f"silence {silence_id} had already expired at {iso(silence.ends_at_seconds)}"
            )
            return
        state.save_silence(silence.expire(at))
    typer.echo(f"expired silence {silence_id} at {iso(at)}")


# NOTE: registered last, so that the help lists it after list and errors.
alerts_app.command("run")(run)
