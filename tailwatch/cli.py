"""The ``tailwatch`` command line."""

from __future__ import annotations

from tailwatch.alerts_cli import alerts_app
from tailwatch.cli_options import typer_app
from tailwatch.collect_cli import collect
from tailwatch.console_cli import console
from tailwatch.engine_cli import engine_app
from tailwatch.incident_cli import incident_app
from tailwatch.init_cli import init
from tailwatch.load_cli import load_app
from tailwatch.replay_cli import replay
from tailwatch.rules_cli import rules_app
from tailwatch.scenario_cli import scenario_app
from tailwatch.slo_cli import slo_app
from tailwatch.store_cli import store_app
from tailwatch.sweep_cli import sweep
from tailwatch.up_cli import up

app = typer_app(
    name="tailwatch",
    help="Observability and SLO operations for LLM inference serving.",
    no_args_is_help=True,
)
app.add_typer(engine_app, name="engine")
app.command()(collect)
app.add_typer(load_app, name="load")
app.add_typer(scenario_app, name="scenario")
app.add_typer(rules_app, name="rules")
app.add_typer(alerts_app, name="alerts")
app.add_typer(incident_app, name="incident")
app.add_typer(store_app, name="store")
app.add_typer(slo_app, name="slo")
app.command()(console)
app.command()(up)
app.command()(init)
app.command()(sweep)
app.command()(replay)


if __name__ == "__main__":
    app()
