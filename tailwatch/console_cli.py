"""``tailwatch console``: the Streamlit operations console (docs/console.md) on
127.0.0.1:8501, reading the store read-only. Options only; the app is :mod:`console`."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Annotated

import typer

from collectors.config import ConfigError
from collectors.metrics_source import METRICS_MATCH_ENV, METRICS_URL_ENV, metrics_source_of
from collectors.store import default_url
from console.launch import console_environment, streamlit_command
from tailwatch.cli_options import cli_error, config_path, port_option
from tailwatch.config import load_config
from tailwatch.store_options import DbOption

LOOPBACK = ("127.0.0.1", "::1", "localhost")


def console(
    db: DbOption = None,
    config: Annotated[
        Path | None,
        typer.Option(
            help="tailwatch.yaml for its slos: (default: ./tailwatch.yaml when it exists)."
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to bind (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, port_option("Port of the console.", allow_zero=False)] = 8501,
    live: Annotated[
        float, typer.Option(help="Seconds between live refreshes of the Overview (0: off).")
    ] = 15.0,
) -> None:
    """Serve the console: Overview, Incidents, Traces, SLOs & goodput, Cost and Capacity over
    the store (opened without migrating: an old schema shows how to migrate it)."""
    if db is not None and not db.strip():
        raise cli_error(f"--db {db!r}: expected a SQLAlchemy URL, e.g. sqlite:///tailwatch.db")
    if not host.strip():
        raise cli_error("--host '': expected an address such as 127.0.0.1")
    if not (math.isfinite(live) and live >= 0):
        raise cli_error(f"--live {live!r}: expected seconds >= 0 (0 turns live refresh off)")
    path = config_path(config)
    database = db
    try:
        metrics = metrics_source_of(None, os.environ)
        if path is not None:
            settings = load_config(path)
            database = database or settings.database_url
            metrics = settings.metrics
    except ConfigError as error:
        raise cli_error(str(error)) from None
    url = database or default_url()
    if host not in LOOPBACK:
        typer.echo(
            f"note: --host {host} serves the console beyond this machine; it has no login",
            err=True,
        )
    env = console_environment(os.environ, url, None if path is None else str(path.resolve()), live)
    if metrics is not None:
        env[METRICS_URL_ENV], env[METRICS_MATCH_ENV] = metrics.url, metrics.match
    read_from = "" if metrics is None else f", metrics from {metrics.url}"
    typer.echo(f"Tailwatch console on http://{host}:{port} (store {url}{read_from})", err=True)
    command = streamlit_command(host, port)
    # NOTE: exec, not a child process: Ctrl-C and a supervisor's SIGTERM reach the server
    # itself, and no parent is left waiting on it.
    os.execve(command[0], command, env)
