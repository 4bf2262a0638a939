"""The ``tailwatch`` command line: a table of its commands, each imported when it is called.

``tailwatch --help`` lists the commands from :data:`COMMANDS` alone, and ``tailwatch NAME ...``
imports NAME's module and no other (click's lazy group), so a command module imports what it
needs at its top and the CLI still starts in a fraction of a second. A new command, or group
of commands, is a row of :data:`COMMANDS`; ``tests/test_cli_commands.py`` holds each row's
help to its command's."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import click
import typer
from typer.core import TyperGroup

from tailwatch.cli_options import typer_app


class CommandRow(NamedTuple):
    """Where a command lives, and the line ``tailwatch --help`` shows for it."""

    module: str
    #: The command's function, or the ``typer.Typer`` of a group of commands.
    attribute: str
    #: Its help's first sentence: what click shortens to fit the terminal.
    help: str


#: Every ``tailwatch`` command, in the order ``tailwatch --help`` lists them.
COMMANDS: dict[str, CommandRow] = {
    "collect": CommandRow(
        "tailwatch.collect_cli",
        "collect",
        "Scrape every target each interval into the store (static targets, a file_sd targets "
        "file re-read on change, NVML GPU telemetry), read configured Prometheus sources, "
        "receive OTLP traces (POST /v1/traces), roll up and expire stored data, and serve the "
        "collector's own /metrics and each target's status (GET /targets).",
    ),
    "console": CommandRow(
        "tailwatch.console_cli",
        "console",
        "Serve the console: Overview, Incidents, Traces, SLOs & goodput, Cost and Capacity over "
        "the store (opened without migrating: an old schema shows how to migrate it).",
    ),
    "up": CommandRow(
        "tailwatch.up_cli",
        "up",
        "Start the engine replicas, the collector with the alert evaluator and the console on "
        "127.0.0.1, each once the one before it is healthy; print the URLs; log each process "
        "to .tailwatch/logs/.",
    ),
    "init": CommandRow(
        "tailwatch.init_cli",
        "init",
        "Write a commented tailwatch.yaml: targets (the bundled engine, a vLLM fleet, a "
        "Prometheus source), SLOs, alert rules and receivers, retention.",
    ),
    "sweep": CommandRow(
        "tailwatch.sweep_cli",
        "sweep",
        "Sweep rates × one knob's values; each point stored as it finishes, then a table of "
        "each value's knee and its goodput and TTFT/ITL tails per rate.",
    ),
    "replay": CommandRow(
        "tailwatch.replay_cli",
        "replay",
        "Replay a stored window's requests (arrival times, prompt and output lengths, tenants, "
        "shared prefixes, the replica each went to) open-loop against candidate knobs; print "
        "replay against production (TTFT, TPOT, ITL, e2e p50/p95/p99, attainment, goodput) "
        "and store it as a lab run.",
    ),
    "engine": CommandRow("tailwatch.engine_cli", "engine_app", "The bundled inference engine."),
    "load": CommandRow(
        "tailwatch.load_cli",
        "load_app",
        "Open-loop load tests and rate sweeps (see docs/loadgen.md).",
    ),
    "scenario": CommandRow(
        "tailwatch.scenario_cli",
        "scenario_app",
        "Reproducible incident drills (see docs/loadgen.md).",
    ),
    "rules": CommandRow(
        "tailwatch.rules_cli",
        "rules_app",
        "Alert rules: export them for Prometheus, check them against the store, backtest them.",
    ),
    "alerts": CommandRow(
        "tailwatch.alerts_cli",
        "alerts_app",
        "Alerts in the store: list them, silence them (see docs/alerts.md).",
    ),
    "incident": CommandRow(
        "tailwatch.incident_cli",
        "incident_app",
        "Incidents: list them, triage one by id (see docs/alerts.md).",
    ),
    "changes": CommandRow(
        "tailwatch.changes_cli",
        "changes_app",
        "What changed: the change events the collector recorded (see docs/collectors.md).",
    ),
    "store": CommandRow(
        "tailwatch.store_cli",
        "store_app",
        "The metrics store: its schema (see docs/collectors.md).",
    ),
    "slo": CommandRow(
        "tailwatch.slo_cli",
        "slo_app",
        "SLOs: propose them from a stored window (docs/slo.md).",
    ),
}


def load_command(name: str) -> click.Command:
    """Import ``name``'s module and build its click command (or group) as typer would have
    built it as a subcommand of ``tailwatch``: the same help, options and errors."""
    row = COMMANDS[name]
    target = getattr(importlib.import_module(row.module), row.attribute)
    parent = typer_app()
    if isinstance(target, typer.Typer):
        parent.add_typer(target, name=name)
    else:
        parent.command(name)(target)
    return typer.main.get_group(parent).commands[name]


class _CommandsOnDemand(Mapping[str, click.Command]):
    """:data:`COMMANDS` as click commands, each built by :func:`load_command` the first time
    it is looked up; listing the names or asking ``name in`` imports nothing."""

    def __init__(self) -> None:
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            self._loaded[name] = load_command(name)  # KeyError when not a command
        return self._loaded[name]

    def get(self, name: str, default: Any = None) -> Any:
        # NOTE: Mapping.get would turn a KeyError raised while importing a command into
        # "No such command"; only a name missing from the table is not a command.
        return self[name] if name in COMMANDS else default

    def __contains__(self, name: object) -> bool:
        return name in COMMANDS

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)


class LazyGroup(TyperGroup):
    """The ``tailwatch`` group: its commands are :data:`COMMANDS`, each module imported when
    the command is looked up (to run it, or for its ``--help``), and the group's ``--help``
    lists them from the table without importing any."""

    def __init__(self, *, commands: Any = None, **attrs: Any) -> None:
        if commands:
            raise TypeError(f"{sorted(commands)}: a tailwatch command is a row of COMMANDS")
        super().__init__(commands=_CommandsOnDemand(), **attrs)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # As click lays the rows out: each help shortened to the room the longest name leaves.
        limit = formatter.width - 6 - max(map(len, COMMANDS))
        rows = [
            (name, click.Command(name, help=row.help).get_short_help_str(limit))
            for name, row in COMMANDS.items()
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


# NOTE: typer makes a group only of an app with a callback or commands of its own, and every
# command here is in the table: this callback, which does nothing, makes ``app`` a group.
def _tailwatch() -> None:
    """Nothing to do before a command."""


app = typer_app(
    name="tailwatch",
    help="Observability and SLO operations for LLM inference serving.",
    no_args_is_help=True,
    cls=LazyGroup,
    callback=_tailwatch,
)


if __name__ == "__main__":
    app()
