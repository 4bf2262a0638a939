"""``tailwatch scenario drill NAME``: a fire drill for the alerting. The scenario runs
compressed against bundled replicas while a real ``tailwatch collect`` scrapes them and
evaluates the alert rules (scaled to the drill's seconds); then the drill reports whether
the scenario's alert paged, how soon, whether triage named the cause, and when it resolved
(``tailwatch.alert_drill``). With ``--virtual`` the scenario runs as written on the virtual
fleet instead (``loadgen.virtual.drill``): simulated replicas on one virtual clock, the same
rules, store and triage in this process, deterministic for ``--seed``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from loadgen.drill import check_real_time
from loadgen.errors import LoadgenError
from loadgen.scenario import builtin_names, load_scenario
from tailwatch.alert_drill import DrillError, clean_twin, report_json, run_alert_drill
from tailwatch.cli_options import cli_error


def drill(
    names: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="NAME...",
            help="Scenarios (built-in names or YAML files); default: every built-in.",
        ),
    ] = None,
    clean: Annotated[
        bool,
        typer.Option("--clean", help="Drill each scenario's clean twin (nothing should page)."),
    ] = False,
    workdir: Annotated[
        Path, typer.Option(help="Where each drill's store, config and collector log go.")
    ] = Path(".tailwatch/drills"),
    output: Annotated[
        Path | None, typer.Option(help="Also write the figures as JSON to this file.")
    ] = None,
    virtual: Annotated[
        bool,
        typer.Option(
            "--virtual",
            help="Run on the virtual fleet (simulated replicas, virtual time, as written: "
            "not compressed); the only drill that can restart a replica.",
        ),
    ] = False,
    seed: Annotated[int, typer.Option(help="The virtual drill's seed (0: as written).")] = 0,
) -> None:
    """Run each scenario with a collector and its evaluator attached and report: the alert
    that paged, its delay after the perturbation began (pending, then firing), the triage
    verdict and the cause's rank and score, and when the page resolved."""
    if seed != 0 and not virtual:
        raise cli_error(
            "--seed: applies to --virtual drills only (a real-time drill is not seeded)"
        )
    chosen = names or list(builtin_names())
    try:
        scenarios = [load_scenario(name) for name in chosen]
    except LoadgenError as error:
        raise cli_error(str(error)) from None
    for scenario in scenarios if not virtual else ():
        try:
            check_real_time(scenario)  # NOTE: every one before the first drill starts
        except LoadgenError as error:
            raise cli_error(f"drill {scenario.name!r}: {error}") from None
    figures = []
    for scenario in scenarios:
        if not virtual:
            scenario = scenario.scaled(scenario.compressed_time_scale)
        if clean:
            scenario = clean_twin(scenario)
        typer.echo(f"drilling {scenario.name}…", err=True)
        try:
            if virtual:
                # NOTE: lazy: it brings torch, which the rest of the scenario group never uses
                from loadgen.virtual.drill import run_virtual_drill

                report = run_virtual_drill(scenario, seed=seed).report
            else:
                report = run_alert_drill(scenario, workdir / scenario.name)
        except (DrillError, LoadgenError, OSError) as error:
            raise cli_error(f"drill {scenario.name!r}: {error}") from None
        figures.append(report_json(report))
        typer.echo(_line(figures[-1]))
    if output is not None:
        output.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


def _line(f: dict) -> str:
    fired = ", ".join(f["fired_alerts"]) or "nothing"
    if f["alert"] is None or f["clean"]:
        return f"{f['scenario']:26} paged: {fired}"
    if not f["fired"]:
        return f"{f['scenario']:26} {f['alert']} did NOT page; paged: {fired}"
    resolved = f["resolved_after_recovery_start_seconds"]
    resolved_text = "still firing" if resolved is None else f"resolved {resolved:+.1f} s"
    return (
        f"{f['scenario']:26} {f['alert']} pending +{f['pending_delay_seconds']:.1f} s, "
        f"firing +{f['detection_delay_seconds']:.1f} s; triage {f['triage_verdict']} "
        f"(cause rank {f['cause_rank']}, score {f['cause_score']:.2f}); {resolved_text} "
        f"after recovery began; paged: {fired}"
    )
