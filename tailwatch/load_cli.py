"""``tailwatch load run`` and ``tailwatch load sweep``: open-loop load over the OpenAI API.
Options only: their text is read by :mod:`loadgen.load_options`, the load is ``loadgen``'s."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer
from prometheus_client import start_http_server
from rich.progress import BarColumn, MofNCompleteColumn, TimeElapsedColumn
from rich.progress import Progress as ProgressBar

from loadgen.client_metrics import ClientMetrics
from loadgen.errors import LoadgenError
from loadgen.load_options import endpoint_route, parse_rates_option, workload_from_options
from loadgen.record import write_jsonl
from loadgen.routing import Router
from loadgen.runner import RunState, run_schedule
from loadgen.summary import headline, parse_slo, summarize
from loadgen.sweep import run_sweep, write_table
from loadgen.workload import build_schedule
from tailwatch.cli_options import (
    check_writable_output,
    cli_error,
    parse_urls,
    save_output,
    typer_app,
)

load_app = typer_app(help="Open-loop load tests and rate sweeps (see docs/loadgen.md).")

Urls = Annotated[str, typer.Option(help="Server root URL(s), comma-separated (no /v1).")]
Duration = Annotated[float, typer.Option(help="Seconds of arrivals (per rate in a sweep).")]
Arrival = Annotated[str, typer.Option(help="poisson | gamma | constant.")]
Burstiness = Annotated[float, typer.Option(help="Gamma shape: 1 Poisson, <1 burstier.")]
Lengths = Annotated[str, typer.Option(help="N | uniform:MIN:MAX | lognormal:MEDIAN:SIGMA:MAX.")]
Replay = Annotated[Path | None, typer.Option(help="JSONL of {prompt_tokens, output_tokens} pairs.")]
PrefixGroups = Annotated[int, typer.Option(help="Number of shared system prompts.")]
PrefixShare = Annotated[float, typer.Option(help="Share of requests with a shared prefix.")]
PrefixTokens = Annotated[int, typer.Option(help="Tokens in each shared prefix.")]
Tenants = Annotated[str, typer.Option(help="name=weight,... (sent as X-Tenant).")]
Priorities = Annotated[str, typer.Option(help="priority=weight,... (sent as X-Priority).")]
Routing = Annotated[str, typer.Option(help="round-robin | least-outstanding | prefix-affinity.")]
Endpoint = Annotated[str, typer.Option(help="completions | chat.")]
MaxInFlight = Annotated[
    int, typer.Option(help="Cap on requests in flight; arrivals over it are dropped and counted.")
]
Seed = Annotated[int, typer.Option(help="Seed of the schedule (same seed, same requests).")]
Slo = Annotated[str, typer.Option(help="Goodput SLOs in ms, e.g. ttft=500,tpot=50,e2el=4000.")]
Progress = Annotated[bool, typer.Option(help="Show a progress bar.")]


def run_with_progress(urls, schedule, *, show: bool, **kwargs):
    """Run a schedule (blocking) with a rich progress bar; Ctrl-C returns what was
    measured, with ``interrupted`` set."""
    state = RunState()
    with ProgressBar(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        disable=not show,
        transient=True,
    ) as bar:
        task = bar.add_task("requests", total=len(schedule))

        def progress(s: RunState) -> None:
            bar.update(task, completed=s.num_finished)

        try:
            asyncio.run(run_schedule(urls, schedule, state=state, on_progress=progress, **kwargs))
        except KeyboardInterrupt:
            state.interrupted = True
    return state


def serve_client_metrics(port: int) -> ClientMetrics:
    """A :class:`ClientMetrics` served on ``port`` (all interfaces, ``/metrics``) by
    prometheus_client's own HTTP server, in a daemon thread that ends with the process."""
    metrics = ClientMetrics()
    try:
        start_http_server(port, registry=metrics.registry)
    except OSError as error:
        raise cli_error(f"--metrics-port {port}: cannot listen ({error})") from None
    return metrics


@load_app.command("run")
def run(
    url: Urls,
    rate: Annotated[float, typer.Option(help="Mean arrivals per second.")],
    duration: Duration = 30.0,
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
    routing: Routing = "round-robin",
    endpoint: Endpoint = "completions",
    max_in_flight: MaxInFlight = 256,
    seed: Seed = 0,
    slo: Slo = "",
    output: Annotated[Path, typer.Option(help="Writes OUTPUT.jsonl and OUTPUT.json.")] = Path(
        "load"
    ),
    progress: Progress = True,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            help="Serve the client's first tokens on this port's /metrics "
            "(tailwatch:client_time_to_first_token_seconds) while the load runs, for the "
            "collector to scrape as a target beside the engines (the client-gap rule)."
        ),
    ] = None,
) -> None:
    """Send one open-loop load and write the per-request JSONL and the JSON summary."""
    try:
        urls = parse_urls(url, "--url")
    except ValueError as error:
        raise cli_error(str(error)) from None
    jsonl_path, json_path = output.with_suffix(".jsonl"), output.with_suffix(".json")
    check_writable_output([jsonl_path, json_path], "--output")
    try:
        workload = workload_from_options(
            rate,
            duration,
            arrivals,
            burstiness,
            prompt_tokens,
            output_tokens,
            replay,
            prefix_groups,
            prefix_share,
            prefix_tokens,
            tenants,
            priorities,
            seed,
        )
        objectives = parse_slo(slo)
        router = Router(urls, routing)
        schedule = build_schedule([workload])
        client_metrics = serve_client_metrics(metrics_port) if metrics_port is not None else None
        state = run_with_progress(
            urls,
            schedule,
            show=progress,
            router=router,
            route=endpoint_route(endpoint),
            max_in_flight=max_in_flight,
            client_metrics=client_metrics,
        )
    except LoadgenError as error:
        raise cli_error(str(error)) from None
    summary = summarize(state.results, max(state.duration_seconds, 1e-9), objectives)
    summary["interrupted"] = state.interrupted
    typer.echo(headline(summary))
    # NOTE: the paths were checked before the load; if writing still fails (a full disk),
    # save_output writes to a temporary file instead, so a finished run is never lost.
    jsonl_path = save_output(jsonl_path, lambda path: write_jsonl(state.results, path))
    json_path = save_output(
        json_path, lambda path: path.write_text(json.dumps(summary, indent=2) + "\n")
    )
    typer.echo(f"wrote {jsonl_path} and {json_path}")
    if state.interrupted:
        raise typer.Exit(code=130)


@load_app.command("sweep")
def sweep(
    url: Urls,
    rates: Annotated[
        str, typer.Option(help="Rates to run, comma-separated; omit to search the knee.")
    ] = "",
    start_rate: Annotated[float, typer.Option(help="Knee search: first rate probed.")] = 1.0,
    target: Annotated[float, typer.Option(help="Knee search: SLO attainment to hold.")] = 0.9,
    max_probes: Annotated[int, typer.Option(help="Knee search: most rates measured.")] = 8,
    duration: Duration = 30.0,
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
    routing: Routing = "round-robin",
    endpoint: Endpoint = "completions",
    max_in_flight: MaxInFlight = 256,
    seed: Seed = 0,
    slo: Slo = "",
    output: Annotated[Path, typer.Option(help="Writes OUTPUT.json and OUTPUT.csv.")] = Path(
        "sweep"
    ),
) -> None:
    """Rate → attainment, goodput, TTFT/ITL p95/p99, throughput; with the engine knobs
    from /admin/config where exposed (TAILWATCH_ADMIN_TOKEN is sent when set)."""
    try:
        urls = parse_urls(url, "--url")
    except ValueError as error:
        raise cli_error(str(error)) from None
    check_writable_output([output.with_suffix(".json"), output.with_suffix(".csv")], "--output")
    try:
        workload = workload_from_options(
            1.0,
            duration,
            arrivals,
            burstiness,
            prompt_tokens,
            output_tokens,
            replay,
            prefix_groups,
            prefix_share,
            prefix_tokens,
            tenants,
            priorities,
            seed,
        )
        rate_list = parse_rates_option(rates)
        rows, knee, knobs = asyncio.run(
            run_sweep(
                urls,
                workload,
                rate_list,
                slo=slo,
                routing=routing,
                route=endpoint_route(endpoint),
                max_in_flight=max_in_flight,
                start_rate=start_rate,
                target=target,
                max_probes=max_probes,
            )
        )
    except (LoadgenError, ValueError) as error:
        raise cli_error(str(error)) from None
    for row in rows:
        typer.echo(
            f"rate {row['rate']:8.3f}  attainment {row['slo_attainment']:.3f}  "
            f"goodput {row['request_goodput']:.2f} req/s"
        )
    if knee is not None:
        typer.echo(f"knee: {knee.knee_rate} req/s (first failing: {knee.first_failing_rate})")
    written = save_output(output, lambda stem: write_table(rows, knobs, stem, knee))
    typer.echo(f"wrote {written.with_suffix('.json')} and {written.with_suffix('.csv')}")
