"""``tailwatch up``: options only; the supervisor is :mod:`tailwatch.up`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from collectors.config import ConfigError
from collectors.urls import url_problem
from tailwatch.cli_options import cli_error, port_option
from tailwatch.config import load_config
from tailwatch.processes import port_is_free
from tailwatch.up import HOST, UpOptions, run_up, taken_port
from tailwatch.up_demo import cycle_durations
from tailwatch.up_prometheus import PrometheusUpOptions, run_up_prometheus

MAX_REPLICAS = 16


def up(
    ctx: typer.Context,
    replicas: Annotated[
        int | None,
        typer.Option(
            help=f"Bundled engine replicas to start (1-{MAX_REPLICAS}; default 3 with --demo, "
            "which its slow-replica drill needs, else 1)."
        ),
    ] = None,
    db: Annotated[
        str | None,
        typer.Option(
            help="SQLAlchemy URL of the store (default: TAILWATCH_DB_URL, "
            "else .tailwatch/tailwatch.db)."
        ),
    ] = None,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo/--no-demo",
            help="Send traffic from three tenants and run an incident drill every few minutes.",
        ),
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            help="tailwatch.yaml for the collector and console (default: one written to "
            ".tailwatch/up.yaml, scraping the replicas started here)."
        ),
    ] = None,
    engine_port: Annotated[
        int, port_option("Port of engine replica 0; replica i listens on +i.", allow_zero=False)
    ] = 8000,
    collector_port: Annotated[
        int, port_option("Port of the collector (OTLP receiver, /targets).", allow_zero=False)
    ] = 4318,
    console_port: Annotated[int, port_option("Port of the console.", allow_zero=False)] = 8501,
    prometheus: Annotated[
        str | None,
        typer.Option(
            help="Run on this Prometheus-compatible server (Prometheus, Thanos, Mimir, "
            "VictoriaMetrics) instead of starting engines: discover its engines, propose SLOs "
            "from its last 7 days, start the evaluator and the console on it; nothing copied."
        ),
    ] = None,
    match: Annotated[
        str,
        typer.Option(
            help="With --prometheus: matchers added to every query, e.g. '{job=\"vllm\"}'."
        ),
    ] = "",
) -> None:
    """Start the engine replicas, the collector with the alert evaluator and the console on
    127.0.0.1, each once the one before it is healthy; print the URLs; log each process to
    .tailwatch/logs/. Ctrl-C or SIGTERM stops everything in reverse order."""
    if prometheus is not None:
        given = [
            flag
            for flag, name in (
                ("--engine-port", "engine_port"),
                ("--collector-port", "collector_port"),
            )
            # NOTE: by name: the ParameterSource enum is the click typer runs on, not ours
            if getattr(ctx.get_parameter_source(name), "name", "DEFAULT") != "DEFAULT"
        ]
        if given:
            raise cli_error(
                f"{' and '.join(given)}: for the bundled engines and collector, which "
                "--prometheus starts neither of"
            )
        raise typer.Exit(
            _up_prometheus(prometheus, match, replicas, demo, db, config, console_port)
        )
    if match:
        raise cli_error("--match is for --prometheus URL (the series of the server to read)")
    if replicas is None:
        replicas = 3 if demo else 1
    if not 1 <= replicas <= MAX_REPLICAS:
        raise cli_error(f"--replicas={replicas}: must be from 1 to {MAX_REPLICAS}")
    if demo:
        try:
            cycle_durations(os.environ)
        except ValueError as error:
            raise cli_error(str(error)) from None
    if db is not None and not db.strip():
        raise cli_error(f"--db {db!r}: expected a SQLAlchemy URL, e.g. sqlite:///tailwatch.db")
    if config is not None:
        try:
            load_config(config)
        except ConfigError as error:
            raise cli_error(str(error)) from None
    options = UpOptions(replicas, db, demo, config, engine_port, collector_port, console_port)
    problem = taken_port(options)
    if problem is not None:
        raise cli_error(problem)
    raise typer.Exit(run_up(options, lambda line: typer.echo(line, err=line.startswith("error:"))))


def _up_prometheus(
    url: str,
    match: str,
    replicas: int | None,
    demo: bool,
    db: str | None,
    config: Path | None,
    console_port: int,
) -> int:
    if replicas is not None or demo:
        raise cli_error("--replicas and --demo start bundled engines; --prometheus reads yours")
    problem = url_problem(url)
    if problem is not None:
        raise cli_error(f"--prometheus: {problem}")
    if db is not None and not db.strip():
        raise cli_error(f"--db {db!r}: expected a SQLAlchemy URL, e.g. sqlite:///tailwatch.db")
    if config is not None:
        try:
            load_config(config)
        except ConfigError as error:
            raise cli_error(str(error)) from None
    if not port_is_free(HOST, console_port):
        raise cli_error(
            f"port {console_port} (the console) is already in use on {HOST}; "
            "stop what holds it or pick another with --console-port"
        )
    options = PrometheusUpOptions(url.rstrip("/"), match.strip(), db, config, console_port)
    return run_up_prometheus(options, lambda line: typer.echo(line, err=line.startswith("error:")))
