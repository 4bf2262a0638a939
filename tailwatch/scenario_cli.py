"""``tailwatch scenario list`` and ``tailwatch scenario run NAME``: incident drills; the group
also holds ``drill`` (:mod:`tailwatch.drill_cli`) and ``generate``
(:mod:`tailwatch.generate_cli`)."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

import typer

from loadgen.drill import check_real_time, run_drill
from loadgen.errors import LoadgenError
from loadgen.record import write_jsonl
from loadgen.replicas import bundled_replicas, write_targets_file
from loadgen.scenario import builtin_names, load_scenario
from tailwatch.cli_options import (
    check_writable_output,
    cli_error,
    parse_urls,
    save_output,
    typer_app,
)
from tailwatch.drill_cli import drill
from tailwatch.generate_cli import generate

scenario_app = typer_app(help="Reproducible incident drills (see docs/loadgen.md).")


@scenario_app.command("list")
def list_scenarios() -> None:
    """The built-in scenarios, with what each perturbs and the signal it must move."""
    for name in builtin_names():
        scenario = load_scenario(name)
        e = scenario.expects
        typer.echo(f"{name:24s} {e.signal} {e.change}s · alert {e.alert} · {e.triage_cause}")


@scenario_app.command("run")
def run(
    name: Annotated[str, typer.Argument(help="A built-in scenario, or a YAML file path.")],
    url: Annotated[
        str,
        typer.Option(help="Replica root URLs, comma-separated; default: start bundled ones."),
    ] = "",
    compressed: Annotated[bool, typer.Option(help="The time-compressed form (tests).")] = False,
    output: Annotated[
        Path, typer.Option(help="Writes OUTPUT.jsonl (requests) and OUTPUT.json (verdict).")
    ] = Path("scenario"),
    otlp_endpoint: Annotated[
        str,
        typer.Option(
            help="Bundled replicas trace every request to this OTLP/HTTP URL "
            "(ending /v1/traces, e.g. a `tailwatch collect` receiver); default: off."
        ),
    ] = "",
    targets_file: Annotated[
        Path | None,
        typer.Option(
            help="Write the replicas as a Prometheus file_sd targets file once they are up "
            "(for a collector's targets_file); default: none."
        ),
    ] = None,
) -> None:
    """Run the phases (baseline, perturbation, recovery) and report the named signal per
    phase. Admin changes need TAILWATCH_ADMIN_TOKEN when --url is given. The replicas'
    ports and each phase's wall-clock start and end are printed and in OUTPUT.json, so a
    collector and evaluator run alongside can be checked against them."""
    jsonl_path, json_path = output.with_suffix(".jsonl"), output.with_suffix(".json")
    check_writable_output([jsonl_path, json_path], "--output")
    if targets_file is not None:
        check_writable_output([targets_file], "--targets-file")
    try:
        replica_urls = parse_urls(url, "--url") if url.strip() else []
    except ValueError as error:
        raise cli_error(str(error)) from None
    endpoint = otlp_endpoint.strip() or None
    if endpoint and replica_urls:
        raise cli_error(
            "--otlp-endpoint: applies to the bundled replicas only; with --url, turn tracing "
            "on in the replicas themselves (tailwatch engine serve --otlp-endpoint)"
        )
    try:
        scenario = load_scenario(name)
        if compressed:
            scenario = scenario.scaled(scenario.compressed_time_scale)
        check_real_time(scenario)
        if replica_urls:
            token = os.environ.get("TAILWATCH_ADMIN_TOKEN")
            _announce(replica_urls, scenario.name, targets_file)
            result = asyncio.run(run_drill(scenario, replica_urls, admin_token=token))
        else:
            token = secrets.token_hex(16)
            typer.echo(f"starting {scenario.replicas} bundled replica(s)…", err=True)
            with bundled_replicas(
                scenario.replicas, scenario.engine, admin_token=token, otlp_endpoint=endpoint
            ) as urls:
                _announce(urls, scenario.name, targets_file)
                result = asyncio.run(run_drill(scenario, urls, admin_token=token))
    except LoadgenError as error:
        raise cli_error(str(error)) from None
    verdict = {**result.verdict(), "otlp_endpoint": endpoint}
    save_output(jsonl_path, lambda path: write_jsonl(result.state.results, path))
    save_output(json_path, lambda path: path.write_text(json.dumps(verdict, indent=2) + "\n"))
    for times in verdict["phase_times"]:
        phase = times["name"]
        value, requests = verdict["phases"][phase], verdict["requests"][phase]
        typer.echo(
            f"{phase:14s} {times['start_utc']} → {times['end_utc']}  "
            f"{verdict['signal']} = {value:.4g} · {requests['num_succeeded']} of "
            f"{requests['num_scheduled']} served, {requests['num_429']} refused (429)"
        )
    moved = "moved as expected" if verdict["moved"] else "did NOT move as expected"
    typer.echo(f"{scenario.name}: {verdict['signal']} {moved}; alert {verdict['alert']!r}")


def _announce(urls: list[str], scenario: str, targets_file: Path | None) -> None:
    """Print the replicas and, if asked, write them as a file_sd targets file: a collector
    watching it starts scraping them (target names ``host:port``, as file_sd's)."""
    for i, replica_url in enumerate(urls):
        typer.echo(f"replica {i}: {replica_url} (port {urlsplit(replica_url).port})", err=True)
    if targets_file is not None:
        try:
            write_targets_file(targets_file, urls, scenario)
        except OSError as error:
            raise cli_error(
                f"--targets-file: cannot write {targets_file}: {error.strerror or error}"
            ) from None


# NOTE: registered last, so that the help lists them after list and run.
scenario_app.command("drill")(drill)
scenario_app.command("generate")(generate)
