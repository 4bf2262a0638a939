"""``tailwatch alerts run``: the evaluator over the store, on the rules and notifiers of
``tailwatch.yaml`` (built-ins when it has no ``alerts:`` section), until SIGINT or SIGTERM;
``--once`` evaluates once and prints what is pending and firing."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

from alerts import EvaluationResult
from alerts.triage import configured_evaluator
from collectors.config import ConfigError
from collectors.error_text import first_line
from collectors.readers import metrics_reader
from tailwatch.cli_options import cli_error, config_path
from tailwatch.config import load_config
from tailwatch.store_options import DbOption, NowOption, open_store, parse_duration, parse_now


def run(
    config: Annotated[
        Path | None,
        typer.Option(help="Configuration file; default: ./tailwatch.yaml when it exists."),
    ] = None,
    db: DbOption = None,
    interval: Annotated[
        str | None,
        typer.Option(
            help="Evaluation interval (15s, 1m, or seconds); default: "
            "alerts.evaluation_interval, 15s."
        ),
    ] = None,
    once: Annotated[
        bool, typer.Option("--once", help="Evaluate once, print the result and exit.")
    ] = False,
    now: NowOption = None,
) -> None:
    """Evaluate the alert rules over the store every --interval: pending → firing after
    `for:`, resolved when the condition clears; state, history and silences are kept in the
    store, and firing and resolved alerts go to the configured notifiers (docs/alerts.md)."""
    path = config_path(config)
    try:
        settings = load_config(path)
    except ConfigError as error:
        raise cli_error(str(error)) from None
    alerts = settings.alerts
    seconds = (
        alerts.evaluation_interval_seconds
        if interval is None
        else parse_duration("--interval", interval)
    )
    for note in alerts.notes:
        typer.echo(f"note: {note}", err=True)
    clock_now = None if now is None else parse_now(now)
    with open_store(db if db is not None else settings.database_url) as store:
        try:
            metrics = metrics_reader(settings.metrics, store)
        except ValueError as error:
            raise cli_error(first_line(error)) from None
        evaluator = configured_evaluator(alerts, store, metrics)
        if once:
            try:
                result = evaluator.evaluate_once(clock_now)
            except Exception as error:  # NOTE: a store that cannot answer is one line
                raise cli_error(f"evaluation failed: {first_line(error)}") from None
            _print_result(result)
            return
        if clock_now is not None:
            raise cli_error("--now is only for --once (a running evaluator follows the clock)")
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        typer.echo(
            f"evaluating {len(alerts.rules)} rules every {seconds:g} s; Ctrl-C stops", err=True
        )
        cycles = evaluator.run(stop, seconds)
        typer.echo(f"stopped after {cycles} evaluations", err=True)


def _print_result(result: EvaluationResult) -> None:
    for alert in (*result.firing, *result.pending):
        muted = " (muted)" if result.is_muted(alert.fingerprint) else ""
        labels = ", ".join(f"{k}={v}" for k, v in sorted(alert.labels.items()) if k != "alertname")
        typer.echo(f"{alert.state.value:8} {alert.name:24} {labels}{muted}")
    for alert in result.resolved:
        typer.echo(f"resolved {alert.name:24} {alert.fingerprint}")
    for error in result.errors:
        typer.echo(f"error: rule {error.rule!r}: {error.message}", err=True)
    typer.echo(f"{len(result.firing)} firing, {len(result.pending)} pending", err=True)
