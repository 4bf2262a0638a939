"""``tailwatch replay --from … --to …``: a stored production window replayed against
candidate knobs on a simulated, bundled or running engine, side by side with what
production saw, and kept in the store as a lab run (``loadgen.replay``; docs/knob-lab.md).

This module takes options only: :func:`loadgen.replay_options.build_replay_plan` reads the
times, knobs, the target and its replicas (a ``ValueError`` naming the option, which the
command prints as one ``error:`` line, exit 2), the same reading the console's *Start a
replay* form checks its fields with."""

from __future__ import annotations

import json
import time
from typing import Annotated

import typer

from collectors.error_text import first_line
from loadgen.errors import LoadgenError, WorkloadError
from loadgen.replay import replay_window
from loadgen.replay_options import build_replay_plan, workload_message
from tailwatch.cli_options import cli_error
from tailwatch.replay_view import (
    open_lab_store,
    progress_bar,
    report_json,
    report_table,
    trace_line,
)
from tailwatch.store_options import DbOption


def replay(
    from_: Annotated[
        str, typer.Option("--from", help="Window start: now, Unix seconds, ISO 8601, or -15m.")
    ],
    to: Annotated[str, typer.Option("--to", help="Window end (same forms).")] = "now",
    db: DbOption = None,
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine", help="tiny (bundled, real time) or sim:<model>@<gpu> (virtual time)."
        ),
    ] = None,
    url: Annotated[
        list[str] | None,
        typer.Option(
            "--url",
            metavar="URL",
            help="A running server's root URL (its own knobs); repeat for a fleet.",
        ),
    ] = None,
    replicas: Annotated[
        str | None,
        typer.Option(
            "--replicas",
            metavar="N",
            help="Replicas of --engine to replay on (default: as many as the records name).",
        ),
    ] = None,
    route: Annotated[
        str,
        typer.Option(
            "--route",
            metavar="as-recorded|round-robin",
            help="as-recorded (each request to the replica it went to) or round-robin.",
        ),
    ] = "as-recorded",
    knob: Annotated[
        list[str] | None, typer.Option("--knob", help="NAME=VALUE, an engine knob; repeat.")
    ] = None,
    slo: Annotated[
        str, typer.Option("--slo", help="Goodput SLOs in ms, e.g. ttft=500,tpot=50,e2el=4000.")
    ] = "",
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Replay only this tenant's requests.")
    ] = None,
    speed: Annotated[
        float, typer.Option("--speed", help="Time scale: 2 replays the window twice as fast.")
    ] = 1.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the synthesized prompts.")] = 0,
    name: Annotated[str, typer.Option("--name", help="The lab run's label.")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Replay a stored window's requests (arrival times, prompt and output lengths, tenants,
    shared prefixes, the replica each went to) open-loop against candidate knobs; print
    replay against production (TTFT, TPOT, ITL, e2e p50/p95/p99, attainment, goodput) and
    store it as a lab run."""
    options = dict(locals())  # NOTE: first: the parameters only

    try:
        spec = build_replay_plan(options, time.time())
    except ValueError as error:
        raise cli_error(str(error)) from None
    plan, start, end, tenant = spec.plan, spec.start, spec.end, spec.tenant
    with open_lab_store(db) as store, progress_bar(show=progress and not as_json) as bar:
        try:
            report = replay_window(
                store,
                store,
                start,
                end,
                plan,
                tenant=tenant,
                progress=bar.update,
                on_trace=lambda trace: bar.start(len(trace.requests), trace_line(trace)),
            )
        except WorkloadError as error:
            raise cli_error(workload_message(error)) from None
        except LoadgenError as error:
            raise cli_error(str(error)) from None
        except KeyboardInterrupt:
            raise cli_error("interrupted; the lab run is marked interrupted") from None
        except Exception as error:  # NOTE: an engine or store failure is one line, kept
            raise cli_error(f"the replay failed: {first_line(error)}") from None
    if as_json:
        typer.echo(json.dumps(report_json(report), indent=2))
    else:
        report_table(report)
