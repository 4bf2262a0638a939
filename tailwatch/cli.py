"""The ``tailwatch`` command line."""

from __future__ import annotations

from typing import Annotated

import typer

from tailwatch.alerts_cli import alerts_app
from tailwatch.alerts_run import run as alerts_run
from tailwatch.cli_options import cli_error, port_option, typer_app
from tailwatch.collect_cli import collect
from tailwatch.console_cli import console
from tailwatch.demo import run_demo
from tailwatch.drill_cli import drill
from tailwatch.engine_cli import engine_app
from tailwatch.generate_cli import generate
from tailwatch.incident_cli import incident_app
from tailwatch.init_cli import init
from tailwatch.load_cli import load_app
from tailwatch.replay_cli import replay
from tailwatch.rules_cli import rules_app
from tailwatch.scenario_cli import scenario_app
from tailwatch.serve_cli import serve
from tailwatch.slo_cli import slo_app
from tailwatch.store_cli import store_app
from tailwatch.sweep_cli import sweep
from tailwatch.up_cli import up

app = typer_app(
    name="tailwatch",
    help="Observability and SLO operations for LLM inference serving.",
    no_args_is_help=True,
)
engine_app.command()(serve)
app.add_typer(engine_app, name="engine")
app.command()(collect)
app.add_typer(load_app, name="load")
scenario_app.command("drill")(drill)
scenario_app.command("generate")(generate)
app.add_typer(scenario_app, name="scenario")
app.add_typer(rules_app, name="rules")
alerts_app.command("run")(alerts_run)
app.add_typer(alerts_app, name="alerts")
app.add_typer(incident_app, name="incident")
app.add_typer(store_app, name="store")
app.add_typer(slo_app, name="slo")
app.command()(console)
app.command()(up)
app.command()(init)
app.command()(sweep)
app.command()(replay)


@app.command()
def demo(
    # NOTE: the demo connects to the ports it is given, so 0 (any free port) cannot work.
    port: Annotated[
        int, port_option("Port of the engine server (127.0.0.1).", allow_zero=False)
    ] = 8000,
    duration: Annotated[float, typer.Option(help="Seconds of demo traffic.")] = 600.0,
    rate: Annotated[float, typer.Option(help="Mean requests per second (Poisson).")] = 3.0,
    interval: Annotated[float, typer.Option(help="Seconds between /metrics reports.")] = 5.0,
    collector_port: Annotated[
        int,
        port_option("Port of the collector (OTLP receiver and its /metrics).", allow_zero=False),
    ] = 4318,
    db_url: Annotated[
        str | None,
        typer.Option(
            help="SQLAlchemy URL of the store (default: TAILWATCH_DB_URL, "
            "else .tailwatch/tailwatch.db)."
        ),
    ] = None,
) -> None:
    """What `make run` starts: the collector and the engine server on loopback, with demo
    traffic and a live view of its metrics (alerting and the console join as they land)."""
    for name, value in (("duration", duration), ("rate", rate), ("interval", interval)):
        if not value > 0:
            raise typer.BadParameter(f"must be > 0, got {value}", param_hint=f"--{name}")
    if port == collector_port:
        raise cli_error(f"--collector-port={collector_port}: is also --port; pick another")
    raise typer.Exit(run_demo(port, duration, rate, interval, collector_port, db_url))


if __name__ == "__main__":
    app()
