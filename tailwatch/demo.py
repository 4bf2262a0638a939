"""``tailwatch demo`` — what ``make run`` starts.

Today that is the bundled engine's server on loopback with demo traffic (streaming chat
requests from three tenants that share a system prompt, arriving at random, Poisson,
times) and the collector daemon (``tailwatch collect``), which scrapes the engine into the
store and receives its OpenTelemetry traces. Every few seconds the demo reads the server's
``/metrics`` and prints what an on-call engineer looks at first: TTFT and ITL percentiles
(Prometheus-exact, from the histograms), throughput, queue, KV usage, prefix-cache hits
and preemptions. After ``duration`` seconds (or a Ctrl-C, or SIGTERM) it stops in order:
traffic; requests in flight finish; the engine's counters are read once it is idle; the
collector stores one more scrape; the server drains and flushes its spans; the collector
writes what it holds. Then it prints what the store holds of the run beside the engine's
own counters, which must agree (``tailwatch.demo_summary``). Alerting and the console
join as they land.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import time
from collections.abc import Iterable

import httpx
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from slo import histogram_quantile
from tailwatch import demo_processes as processes
from tailwatch.demo_summary import (
    RunCounts,
    engine_counts,
    format_ms,
    print_summary,
    wait_for_scrape,
)

console = Console()

SYSTEM_PROMPT = (
    "You are Tailwatch's demo assistant. You answer questions about LLM serving: time to "
    "first token, inter-token latency, KV cache pressure, preemption and goodput."
)
QUESTIONS = (
    "What is TTFT?",
    "Why does ITL p99 rise when long prompts arrive?",
    "What does preemption by recompute cost?",
    "How does prefix caching help a shared system prompt?",
    "When should I raise max_num_batched_tokens?",
    "What is goodput?",
)
TENANTS = ("acme", "globex", "initech")


#: Seconds between the demo collector's scrapes.
COLLECT_INTERVAL_SECONDS = 2.0
#: Seconds requests still in flight get to finish once the traffic stops.
IN_FLIGHT_TIMEOUT_SECONDS = 60.0
#: Seconds the engine gets to finish what it holds before its counters are read.
IDLE_TIMEOUT_SECONDS = 30.0
#: Seconds to wait for the collector to store a scrape taken at a given time.
SCRAPE_WAIT_SECONDS = 3 * COLLECT_INTERVAL_SECONDS + 10.0


def _started(process: subprocess.Popen, url: str, what: str, port_option: str, log: str) -> bool:
    """Wait until ``url`` answers; else print one error line (naming ``port_option`` when
    the port is taken) and return False."""
    try:
        processes.wait_ready(process, url, f"the {what}", log)
    except RuntimeError as error:
        hint = f"; pick another with {port_option}" if "in use" in str(error) else ""
        console.print(
            f"[bold red]error:[/] the {what} did not start: {error}{hint}", soft_wrap=True
        )
        return False
    return True


async def _one_request(client: httpx.AsyncClient, rng: random.Random) -> None:
    body = {
        "model": "tiny",
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": rng.choice(QUESTIONS)},
        ],
        "max_tokens": rng.randint(16, 96),
        "temperature": 0.8,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    headers = {"X-Tenant": rng.choice(TENANTS)}
    with contextlib.suppress(httpx.HTTPError):
        async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
            async for _ in r.aiter_lines():
                pass


def _series(families: dict, name: str) -> list:
    family = families.get(name)
    return family.samples if family is not None else []


def _value(families: dict, name: str) -> float:
    return sum(s.value for s in _series(families, name))


def _quantile(families: dict, name: str, q: float) -> float:
    buckets: dict[float, float] = {}
    for s in _series(families, name):
        if s.name == f"{name}_bucket":
            le = float(s.labels["le"])
            buckets[le] = buckets.get(le, 0.0) + s.value
    return histogram_quantile(q, buckets.items()).value


def _scrape(base_url: str) -> dict:
    text = httpx.get(f"{base_url}/metrics", timeout=5).text
    return {f.name: f for f in text_string_to_metric_families(text)}


COLUMNS = (
    ("t s", 4), ("reqs", 6), ("tok/s", 6), ("TTFT p50", 9), ("TTFT p95", 9),
    ("ITL p95", 8), ("run", 5), ("wait", 5), ("KV", 6), ("prefix hit", 11),
    ("preempt", 8),
)  # fmt: skip


def _line(cells: Iterable[str]) -> str:
    return "".join(cell.rjust(width) for cell, (_, width) in zip(cells, COLUMNS, strict=True))


async def _traffic(base_url: str, rate: float, duration: float, interval: float) -> str | None:
    """Send requests and print the table until ``duration`` or a Ctrl-C (or SIGTERM); then
    let the requests in flight finish (a second Ctrl-C aborts them). Returns why the
    traffic stopped early when the engine stopped answering, else None."""
    loop = asyncio.get_running_loop()
    stop, hurry = asyncio.Event(), asyncio.Event()

    def on_signal() -> None:
        if stop.is_set():
            hurry.set()
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    try:
        return await _send(base_url, rate, duration, interval, stop, hurry)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _send(
    base_url: str,
    rate: float,
    duration: float,
    interval: float,
    stop: asyncio.Event,
    hurry: asyncio.Event,
) -> str | None:
    rng = random.Random(0)
    started = time.monotonic()
    tasks: set[asyncio.Task] = set()
    console.print(_line(name for name, _ in COLUMNS), style="bold", highlight=False, soft_wrap=True)
    last_tokens, last_time = 0.0, started
    next_report = started + interval
    failure = None
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as client:
        while not stop.is_set() and time.monotonic() - started < duration:
            pause = min(rng.expovariate(rate), max(0.0, next_report - time.monotonic()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), pause)
            if stop.is_set():
                break
            if time.monotonic() >= next_report:
                try:
                    families = await asyncio.to_thread(_scrape, base_url)
                except httpx.HTTPError as error:
                    failure = f"the engine server stopped answering /metrics ({error})"
                    break
                tokens = _value(families, "vllm:generation_tokens")
                now = time.monotonic()
                queries = _value(families, "vllm:prefix_cache_queries")
                hits = _value(families, "vllm:prefix_cache_hits")
                console.print(_line((
                    f"{now - started:.0f}",
                    f"{_value(families, 'vllm:request_success'):.0f}",
                    f"{(tokens - last_tokens) / (now - last_time):.0f}",
                    format_ms(_quantile(families, "vllm:time_to_first_token_seconds", 0.5)),
                    format_ms(_quantile(families, "vllm:time_to_first_token_seconds", 0.95)),
                    format_ms(_quantile(families, "vllm:inter_token_latency_seconds", 0.95)),
                    f"{_value(families, 'vllm:num_requests_running'):.0f}",
                    f"{_value(families, 'vllm:num_requests_waiting'):.0f}",
                    f"{_value(families, 'vllm:kv_cache_usage_perc') * 100:.1f}%",
                    f"{hits / queries * 100:.0f}%" if queries else "-",
                    f"{_value(families, 'vllm:num_preemptions'):.0f}",
                )), highlight=False, soft_wrap=True)  # fmt: skip
                last_tokens, last_time = tokens, now
                next_report = now + interval
                continue
            task = asyncio.create_task(_one_request(client, rng))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        # NOTE: let what was sent finish, so the engine's counters and the store's records
        # cover the same requests; the requests are short (at most 96 tokens).
        if failure is None and not hurry.is_set():
            which = "request in flight gets" if len(tasks) == 1 else "requests in flight get"
            waiting = (
                f"{len(tasks)} {which} up to {IN_FLIGHT_TIMEOUT_SECONDS:.0f} s to finish "
                "(Ctrl-C again aborts them)"
            )
            console.print(f"Traffic stopped; {waiting if tasks else 'none in flight'}.")
        deadline = time.monotonic() + IN_FLIGHT_TIMEOUT_SECONDS
        while tasks and failure is None and not hurry.is_set() and time.monotonic() < deadline:
            await asyncio.wait(set(tasks), timeout=0.2)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return failure


def _idle_counts(base_url: str) -> tuple[RunCounts, float] | None:
    """The engine's counters once it holds no request (twice in a row, so an abort still
    on its way is counted), and the wall time they were read; None if it does not answer
    or stays busy past ``IDLE_TIMEOUT_SECONDS``."""
    deadline = time.monotonic() + IDLE_TIMEOUT_SECONDS
    num_idle = 0
    while time.monotonic() < deadline:
        try:
            families = _scrape(base_url)
        except httpx.HTTPError:
            return None
        busy = _value(families, "vllm:num_requests_running") + _value(
            families, "vllm:num_requests_waiting"
        )
        num_idle = num_idle + 1 if busy == 0 else 0
        if num_idle == 2:
            return engine_counts(families), time.time()
        time.sleep(0.25)
    return None


def run_demo(
    port: int,
    duration_seconds: float,
    rate: float,
    interval_seconds: float,
    collector_port: int = 4318,
    db_url: str | None = None,
) -> int:
    """Start the collector and the server, send demo traffic, report, stop both in order
    and check the store against the engine's counters; returns the process exit code (1
    when the store does not match)."""
    from collectors.store import default_url

    db_url = db_url or default_url()
    base_url = f"http://127.0.0.1:{port}"
    collector_url = f"http://127.0.0.1:{collector_port}"
    target = f"127.0.0.1:{port}"
    console.print(
        f"[bold]Tailwatch demo[/]: starting the collector at {collector_url} (store "
        f"{db_url}) and the bundled engine ([bold]tiny[/] preset: seeded random weights, "
        f"byte-level tokenizer) at {base_url} ..."
    )
    # NOTE: SIGTERM (e.g. `timeout`, a service manager) ends the demo as Ctrl-C does, so
    # the children are still stopped in order.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    collector = processes.start_collector(port, collector_port, db_url, COLLECT_INTERVAL_SECONDS)
    server: subprocess.Popen | None = None
    started = time.time()
    final: tuple[RunCounts, float] | None = None
    code = 0
    try:
        if not _started(
            collector, f"{collector_url}/metrics", "collector", "--collector-port",
            processes.COLLECTOR_LOG,
        ):  # fmt: skip
            return 2
        server = processes.start_server(port, f"{collector_url}/v1/traces")
        if not _started(
            server, f"{base_url}/ready", "engine server", "--port", processes.ENGINE_LOG
        ):
            return 2
        console.print(
            f"Ready. OpenAI API: {base_url}/v1   metrics: {base_url}/metrics   "
            f"probes: {base_url}/ready\n"
            f"Collector: scrapes {base_url}/metrics every {COLLECT_INTERVAL_SECONDS:g} s and "
            f"receives the engine's traces at {collector_url}/v1/traces; its own metrics at "
            f"{collector_url}/metrics. Logs: {processes.COLLECTOR_LOG}, {processes.ENGINE_LOG}.\n"
            f"Sending streaming chat requests from tenants {', '.join(TENANTS)} at about "
            f"{rate:g} req/s for {duration_seconds:.0f} s (Ctrl-C stops earlier). Every "
            f"{interval_seconds:.0f} s the table below is re-read from /metrics: request "
            "count, output tokens/s since the last row, TTFT and inter-token latency "
            "percentiles (Prometheus histogram_quantile over vLLM's buckets), running and "
            "waiting requests, KV cache in use, the share of prompt tokens "
            "served from the prefix cache (the shared system prompt) and preemptions. Latencies\n"
            "are in ms and cumulative since the server started.\n"
        )
        # The stored window's baseline: a scrape before the first request.
        if not wait_for_scrape(db_url, target, started, SCRAPE_WAIT_SECONDS):
            console.print("(the collector has not stored a scrape of the engine yet)")
        failure = asyncio.run(_traffic(base_url, rate, duration_seconds, interval_seconds))
        if failure is not None:
            console.print(f"[bold red]error:[/] {failure}", soft_wrap=True)
            code = 1
        final = _idle_counts(base_url)
        # ... and its end: a scrape after the last request.
        if final is not None and not wait_for_scrape(db_url, target, final[1], SCRAPE_WAIT_SECONDS):
            console.print("(the collector stored no scrape of the engine after the traffic)")
    except KeyboardInterrupt:
        code = 130
    finally:
        # NOTE: still ours while the children stop: a second signal kills the one it
        # interrupts (processes.stop) rather than leaving both running.
        if server is not None:
            console.print(f"Demo stopped; {processes.stop(server, 'engine server')}.")
        console.print(f"{processes.stop(collector, 'collector').capitalize()}.")
        signal.signal(signal.SIGTERM, previous)
    if server is not None:
        matches = print_summary(console, db_url, target, started, time.time(), final)
        if not matches and code == 0:
            code = 1
    return code


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    raise SystemExit(run_demo(int(os.environ.get("PORT", "8000")), 60, 3, 5))
