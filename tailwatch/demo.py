"""``tailwatch demo`` — what ``make run`` starts.

Today that is the bundled engine's server on loopback with demo traffic (streaming chat
requests from three tenants that share a system prompt, arriving at random, Poisson,
times) and the collector daemon (``tailwatch collect``), which scrapes the engine into the
store and receives its OpenTelemetry traces. Every few seconds the demo reads the server's
``/metrics`` and prints what an on-call engineer looks at first: TTFT and ITL percentiles
(Prometheus-exact, from the histograms), throughput, queue, KV usage, prefix-cache hits
and preemptions. It stops by itself after ``duration`` seconds (or on Ctrl-C), drains the
server, stops the collector, and prints what the store holds of the run. Alerting and the
console join as they land.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterable

import httpx
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from slo import histogram_quantile

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


def _start_server(port: int, otlp_endpoint: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "tailwatch.cli", "engine", "serve", "--model", "tiny"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--max-model-len", "1024"]
    command += ["--max-waiting-requests", "256", "--no-access-log"]
    command += ["--otlp-endpoint", otlp_endpoint]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _start_collector(engine_port: int, collector_port: int, db_url: str) -> subprocess.Popen:
    os.makedirs(".tailwatch", exist_ok=True)
    # NOTE: a config of its own, so that a tailwatch.yaml in the working folder (with the
    # user's real targets) is not picked up by the demo.
    config = os.path.join(".tailwatch", "demo-collector.yaml")
    with open(config, "w") as file:
        file.write("# written by `tailwatch demo`\ncollector: {}\n")
    command = [sys.executable, "-m", "tailwatch.cli", "collect", "--config", config]
    command += ["--target", f"http://127.0.0.1:{engine_port}/metrics"]
    command += ["--interval", f"{COLLECT_INTERVAL_SECONDS:g}", "--db-url", db_url]
    command += ["--listen", f"127.0.0.1:{collector_port}"]
    # NOTE: its log goes to a file, not the demo's terminal; the error of a failed start is
    # read back from there.
    with open(_collector_log(), "w") as log:  # the child keeps its own copy of the handle
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True)


def _collector_log() -> str:
    return os.path.join(".tailwatch", "demo-collector.log")


def _wait_ready(
    process: subprocess.Popen, url: str, what: str, timeout_seconds: float = 180
) -> None:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            if process.stderr is not None:
                message = process.stderr.read()
            else:
                with open(_collector_log()) as log:
                    message = log.read()
            errors = [line for line in message.splitlines() if line.startswith("error:")]
            message = errors[-1] if errors else message
            raise RuntimeError(message.strip().removeprefix("error:").strip() or "it exited")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1).status_code == 200:
                return
        time.sleep(0.3)
    raise RuntimeError(f"{what} did not become ready within {timeout_seconds:.0f} s")


def _started(process: subprocess.Popen, url: str, what: str, port_option: str) -> bool:
    """Wait until ``url`` answers; else print one error line (naming ``port_option`` when
    the port is taken) and return False."""
    try:
        _wait_ready(process, url, f"the {what}")
    except RuntimeError as error:
        hint = f"; pick another with {port_option}" if "in use" in str(error) else ""
        console.print(f"[bold red]error:[/] the {what} did not start: {error}{hint}")
        return False
    return True


def _stop(process: subprocess.Popen, what: str, timeout_seconds: float = 60) -> str:
    if process.poll() is not None:
        return f"the {what} had exited"
    process.send_signal(signal.SIGTERM)  # drains / flushes, then exits
    try:
        process.wait(timeout=timeout_seconds)
        return f"the {what} has drained and exited"
    except subprocess.TimeoutExpired:
        process.kill()
        return f"the {what} did not stop in {timeout_seconds:.0f} s: killed"


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


def _ms(seconds: float) -> str:
    return "-" if seconds != seconds else f"{seconds * 1000:.0f}"


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


async def _traffic(base_url: str, rate: float, duration: float, interval: float) -> None:
    rng = random.Random(0)
    started = time.monotonic()
    tasks: set[asyncio.Task] = set()
    console.print(_line(name for name, _ in COLUMNS), style="bold", highlight=False, soft_wrap=True)
    last_tokens, last_time = 0.0, started
    next_report = started + interval
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as client:
        while time.monotonic() - started < duration:
            await asyncio.sleep(
                min(rng.expovariate(rate), max(0.0, next_report - time.monotonic()))
            )
            if time.monotonic() >= next_report:
                families = await asyncio.to_thread(_scrape, base_url)
                tokens = _value(families, "vllm:generation_tokens")
                now = time.monotonic()
                queries = _value(families, "vllm:prefix_cache_queries")
                hits = _value(families, "vllm:prefix_cache_hits")
                console.print(_line((
                    f"{now - started:.0f}",
                    f"{_value(families, 'vllm:request_success'):.0f}",
                    f"{(tokens - last_tokens) / (now - last_time):.0f}",
                    _ms(_quantile(families, "vllm:time_to_first_token_seconds", 0.5)),
                    _ms(_quantile(families, "vllm:time_to_first_token_seconds", 0.95)),
                    _ms(_quantile(families, "vllm:inter_token_latency_seconds", 0.95)),
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
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def run_demo(
    port: int,
    duration_seconds: float,
    rate: float,
    interval_seconds: float,
    collector_port: int = 4318,
    db_url: str | None = None,
) -> int:
    """Start the collector and the server, send demo traffic, report; returns the process
    exit code."""
    from collectors.store import default_url

    db_url = db_url or default_url()
    base_url = f"http://127.0.0.1:{port}"
    collector_url = f"http://127.0.0.1:{collector_port}"
    console.print(
        f"[bold]Tailwatch demo[/]: starting the collector at {collector_url} (store "
        f"{db_url}) and the bundled engine ([bold]tiny[/] preset: seeded random weights, "
        f"byte-level tokenizer) at {base_url} ..."
    )
    collector = _start_collector(port, collector_port, db_url)
    server: subprocess.Popen | None = None
    started = time.time()
    try:
        if not _started(collector, f"{collector_url}/metrics", "collector", "--collector-port"):
            return 2
        server = _start_server(port, f"{collector_url}/v1/traces")
        if not _started(server, f"{base_url}/ready", "engine server", "--port"):
            return 2
        console.print(
            f"Ready. OpenAI API: {base_url}/v1   metrics: {base_url}/metrics   "
            f"probes: {base_url}/ready\n"
            f"Collector: scrapes {base_url}/metrics every {COLLECT_INTERVAL_SECONDS:g} s and "
            f"receives the engine's traces at {collector_url}/v1/traces; its own metrics at "
            f"{collector_url}/metrics; log in {_collector_log()}.\n"
            f"Sending streaming chat requests from tenants {', '.join(TENANTS)} at about "
            f"{rate:g} req/s for {duration_seconds:.0f} s (Ctrl-C stops earlier). Every "
            f"{interval_seconds:.0f} s the table below is re-read from /metrics: request "
            "count, output tokens/s since the last row, TTFT and inter-token latency "
            "percentiles (Prometheus histogram_quantile over vLLM's buckets), running and "
            "waiting requests, KV cache in use, the share of prompt tokens "
            "served from the prefix cache (the shared system prompt) and preemptions. Latencies\n"
            "are in ms and cumulative since the server started.\n"
        )
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_traffic(base_url, rate, duration_seconds, interval_seconds))
        return 0
    finally:
        if server is not None:
            console.print(f"Demo stopped; {_stop(server, 'engine server')}.")
        console.print(f"{_stop(collector, 'collector').capitalize()}.")
        if server is not None:
            _store_summary(db_url, f"127.0.0.1:{port}", started, time.time())


def _store_summary(db_url: str, target: str, start: float, end: float) -> None:
    """What the collector stored of this run: scrapes, request records, and the run's
    TTFT percentiles computed from the stored histograms (the window merge)."""
    from collectors.store import Store

    try:
        store = Store(db_url)
    except Exception as error:  # NOTE: a summary must never turn a finished demo into a crash
        console.print(f"(no store summary: {error})")
        return
    try:
        scrapes = [s for s in store.scrapes(target) if start <= s[0] <= end]
        requests = store.requests(start, end)
        window = store.histogram_window("ttft_seconds", {"target": target}, start, end)
    finally:
        store.close()
    line = (
        f"The store holds {len(scrapes)} scrapes of {target} "
        f"({sum(1 for s in scrapes if s[1])} up) and {len(requests)} request records "
        "from the traces"
    )
    count = window.cumulative_counts[-1] if window is not None else 0.0
    if window is not None and count > 0:
        buckets = list(zip(window.upper_bounds, window.cumulative_counts, strict=True))
        p50, p99 = (histogram_quantile(q, buckets).value for q in (0.5, 0.99))
        line += (
            f"; over the run, TTFT p50 {_ms(p50)} ms and p99 {_ms(p99)} ms from "
            f"{count:.0f} stored observations"
        )
    console.print(line + ".", highlight=False, soft_wrap=True)


if __name__ == "__main__":
    raise SystemExit(run_demo(int(os.environ.get("PORT", "8000")), 60, 3, 5))
