"""``tailwatch sweep``: rates × one knob's values against a simulated, bundled or running
engine, stored for the console's knob lab. Options only: they are read into a plan by
:func:`loadgen.lab_plan.build_sweep_plan`, the sweep is :mod:`loadgen.lab_sweep`, the knee
:mod:`loadgen.lab_knee` (see docs/knob-lab.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TimeElapsedColumn
from rich.progress import Progress as ProgressBar

from collectors.config import ConfigError
from collectors.error_text import first_line
from collectors.store import Store, default_url
from collectors.store.lab_records import LabRunStatus
from loadgen.errors import LoadgenError
from loadgen.lab_knee import knee_curves
from loadgen.lab_plan import build_sweep_plan
from loadgen.lab_sweep import run_lab_sweep
from loadgen.lab_table import knee_table
from tailwatch.cli_options import cli_error, config_path
from tailwatch.config import load_config
from tailwatch.load_cli import (
    Arrival,
    Burstiness,
    Endpoint,
    Lengths,
    MaxInFlight,
    PrefixGroups,
    PrefixShare,
    PrefixTokens,
    Priorities,
    Progress,
    Replay,
    Seed,
    Tenants,
)

_DEFAULT_ENGINE_HELP = "sim:<model>@<gpu> (virtual time) or a bundled model such as tiny."


def sweep(
    knob: Annotated[str, typer.Option(help="NAME=V1,V2,...: the engine knob and its values.")],
    rates: Annotated[str, typer.Option(help="Arrival rates (req/s), comma-separated.")],
    engine: Annotated[str | None, typer.Option(help=_DEFAULT_ENGINE_HELP)] = None,
    url: Annotated[
        str | None, typer.Option(help="A running engine; its knob is set via /admin/config.")
    ] = None,
    engine_knobs: Annotated[
        str, typer.Option(help="KNOB=VALUE,... every point shares (--engine only).")
    ] = "",
    repeats: Annotated[int, typer.Option(help="Runs of each (value, rate), re-seeded.")] = 1,
    duration: Annotated[float, typer.Option(help="Seconds of arrivals per point.")] = 60.0,
    arrivals: Arrival = "poisson",
    burstiness: Burstiness = 1.0,
    prompt_tokens: Lengths = "128",
    output_tokens: Lengths = "64",
    replay: Replay = None,
    prefix_groups: PrefixGroups = 0,
    prefix_share: PrefixShare = 1.0,
    prefix_tokens: PrefixTokens = 0,
    tenants: Tenants = "",
    priorities: Priorities = "",
    seed: Seed = 0,
    slo: Annotated[str, typer.Option(help="Goodput SLOs in ms, e.g. ttft:500,itl:50.")] = "",
    target: Annotated[float, typer.Option(help="SLO attainment the knee must hold.")] = 0.9,
    name: Annotated[str, typer.Option(help="A label for the stored run.")] = "",
    endpoint: Endpoint = "completions",
    max_in_flight: MaxInFlight = 256,
    db: Annotated[
        str | None,
        typer.Option(
            help="SQLAlchemy URL of the store (default: TAILWATCH_DB_URL, else the config's, "
            "else .tailwatch/tailwatch.db)."
        ),
    ] = None,
    config: Annotated[Path | None, typer.Option(help="tailwatch.yaml (for its store).")] = None,
    progress: Progress = True,
) -> None:
    """Sweep rates × one knob's values; each point stored as it finishes, then a table of
    each value's knee and its goodput and TTFT/ITL tails per rate."""
    plan = _plan(locals())
    url_of_store = _store_url(db, config)

    try:
        store = Store(url_of_store)
    except Exception as error:  # NOTE: any URL, driver or schema error is one line
        raise cli_error(
            f"--db: cannot open the store {url_of_store}: {first_line(error)}"
        ) from None
    try:
        _run(plan, store, progress)
    finally:
        store.close()


def _plan(options: dict[str, Any]):
    try:
        return build_sweep_plan(options)
    except (LoadgenError, ValueError) as error:
        raise cli_error(str(error)) from None


def _store_url(db: str | None, config: Path | None) -> str:
    if db is not None:
        if not db.strip():
            raise cli_error(f"--db {db!r}: expected a SQLAlchemy URL, e.g. sqlite:///tailwatch.db")
        return db
    path = config_path(config)
    if path is not None:
        try:
            database = load_config(path).database_url
        except ConfigError as error:
            raise cli_error(str(error)) from None
        if database:
            return database
    return default_url()


def _run(plan, store, show: bool) -> None:
    console = Console()
    if not console.is_terminal:  # NOTE: piped or captured: every column at full width
        console = Console(width=150)
    columns = ("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())  # fmt: skip
    with ProgressBar(*columns, disable=not show, transient=True) as bar:
        task = bar.add_task("points", total=plan.num_planned_points)

        def on_point(point, done: int, planned: int) -> None:
            bar.update(task, completed=done,
                       description=f"{plan.knob}={point.knob_value} @ {point.rate:g} req/s")  # fmt: skip

        try:
            outcome = run_lab_sweep(plan, store, on_point)
        except LoadgenError as error:
            raise cli_error(str(error)) from None
    curves = knee_curves(outcome.points, plan.target_attainment)
    if curves:
        console.print(knee_table(plan.knob, curves, plan.target_attainment))
    typer.echo(f"stored lab run {outcome.run_id} ({outcome.status.value}, "
               f"{len(outcome.points)} of {plan.num_planned_points} points)")  # fmt: skip
    if outcome.status is LabRunStatus.FAILED:
        typer.echo(f"error: lab run {outcome.run_id} failed: {outcome.error}", err=True)
        raise typer.Exit(code=1)
    if outcome.status is LabRunStatus.INTERRUPTED:
        raise typer.Exit(code=130)
