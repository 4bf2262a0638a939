"""Collector ingest: how many vLLM-sized targets one CPU core keeps up with at a 5 s interval.

Simulated targets expose every default-on family of vLLM 0.33 (``shared/reference/
engine-metrics.md`` §2.1-§2.3: gauges, counters with their ``_created`` samples, the 16
request/iteration histograms with the §3 bucket layouts, ``request_tokens`` for
max_model_len 32768) for two models (``model_name``), plus the process/python collector
metrics a real server also exposes, all defined with ``prometheus_client`` as vLLM defines
them and rendered by the encoder the ``Accept`` header picks (as vLLM's ``make_asgi_app``
does: OpenMetrics for the collector). Values advance on every scrape. They are served from
loopback by a server in a separate process, so its CPU is not counted.

The real ``Scraper`` + ``Collector`` + ``Store`` ingest them. Because the machine may be shared
and noisy, the figure is the collector process's CPU time (``time.process_time``: every
thread, including the store's writer thread), not wall time:
targets per core = N x interval / CPU seconds per cycle. For PostgreSQL the server's backend
CPU (from ``/proc/<pid>/stat`` of the connections to the bench's database) is reported
separately when readable.

``python -m bench collector_ingest``; ``TAILWATCH_BENCH_PG_URL`` (or ``TAILWATCH_TEST_PG_URL``)
adds the PostgreSQL run, on a fresh database that is dropped afterwards;
``TAILWATCH_BENCH_TARGETS`` / ``TAILWATCH_BENCH_CYCLES`` change N (100) and the measured
cycles (3). Each store is measured twice, once per ``collector.scrape_protocols`` choice:
OpenMetrics first (the default: exemplars arrive; ``prometheus_client``'s OpenMetrics parser)
and Prometheus text 0.0.4 only (no exemplars; ``prometheus_client``'s text parser).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import random
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

INTERVAL_SECONDS = 5.0
#: ``collector.scrape_protocols`` settings measured: (short name, protocols).
PROTOCOLS = (
    ("openmetrics", ("OpenMetricsText1.0.0", "PrometheusText0.0.4")),
    ("text", ("PrometheusText0.0.4",)),
)
MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-0.6B")

# §3 bucket layouts (vllm/v1/metrics/buckets.py, 0.33)
TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
        10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
       20.0, 40.0, 80.0)  # fmt: skip
REQUEST_LATENCY = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                   60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
ITERATION_TOKENS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
PARAMS_N = (1, 2, 5, 10, 20)
NUM_PREEMPTIONS = (1, 2, 3, 4, 5, 10, 20)
REQUEST_TOKENS = tuple(m * 10**k for k in range(5) for m in (1, 2, 5) if m * 10**k <= 32768)

HISTOGRAMS = (
    ("vllm:time_to_first_token_seconds", TTFT),
    ("vllm:inter_token_latency_seconds", ITL),
    ("vllm:request_time_per_output_token_seconds", ITL),
    ("vllm:e2e_request_latency_seconds", REQUEST_LATENCY),
    ("vllm:request_queue_time_seconds", REQUEST_LATENCY),
    ("vllm:request_prefill_time_seconds", REQUEST_LATENCY),
    ("vllm:request_decode_time_seconds", REQUEST_LATENCY),
    ("vllm:request_inference_time_seconds", REQUEST_LATENCY),
    ("vllm:request_prompt_tokens", REQUEST_TOKENS),
    ("vllm:request_generation_tokens", REQUEST_TOKENS),
    ("vllm:request_max_num_generation_tokens", REQUEST_TOKENS),
    ("vllm:request_params_max_tokens", REQUEST_TOKENS),
    ("vllm:request_params_n", PARAMS_N),
    ("vllm:request_prefill_kv_computed_tokens", REQUEST_TOKENS),
    ("vllm:request_num_preemptions", NUM_PREEMPTIONS),
    ("vllm:iteration_tokens_total", ITERATION_TOKENS),
)
# (declared name, extra label name, its values); on the wire counters get ``_total``
COUNTERS = (
    ("vllm:prefix_cache_queries", None, ()),
    ("vllm:prefix_cache_hits", None, ()),
    ("vllm:external_prefix_cache_queries", None, ()),
    ("vllm:external_prefix_cache_hits", None, ()),
    ("vllm:mm_cache_queries", None, ()),
    ("vllm:mm_cache_hits", None, ()),
    ("vllm:num_preemptions", None, ()),
    ("vllm:prompt_tokens", None, ()),
    ("vllm:prompt_tokens_by_source", "source",
     ("local_compute", "local_cache_hit", "external_kv_transfer")),
    ("vllm:prompt_tokens_cached", None, ()),
    ("vllm:prompt_tokens_cached_by_source", "source",
     ("device", "host", "p2p", "disk", "external_unspecified")),
    ("vllm:generation_tokens", None, ()),
    ("vllm:request_success", "finished_reason", ("stop", "length", "abort", "error", "repetition")),
)  # fmt: skip
GAUGES = (
    ("vllm:num_requests_running", None, ()),
    ("vllm:num_requests_waiting", None, ()),
    ("vllm:num_requests_waiting_by_reason", "reason", ("capacity", "deferred")),
    ("vllm:engine_sleep_state", "sleep_state", ("awake", "weights_offloaded", "discard_all")),
    ("vllm:kv_cache_usage_perc", None, ()),
)


class SimulatedVllm:
    """One simulated vLLM server: a ``prometheus_client`` registry with vLLM 0.33's metric
    definitions (as vLLM declares them), rendered by the encoder the request's ``Accept``
    header picks, as vLLM's ``make_asgi_app`` does (OpenMetrics for the collector's header)."""

    def __init__(self, index: int) -> None:
        from prometheus_client import (
            CollectorRegistry,
            Counter,
            Gauge,
            GCCollector,
            Histogram,
            PlatformCollector,
            ProcessCollector,
        )

        self.rng = random.Random(index)
        self.registry = registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        base = ["model_name", "engine"]
        self.gauges = []
        for name, label, values in GAUGES:
            gauge = Gauge(name, "Simulated.", base + ([label] if label else []), registry=registry)
            self.gauges.extend(gauge.labels(m, "0", *([v] if v else [])) for m in MODELS for v in values or [None])  # fmt: skip
        info = Gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                     ["block_size", "cache_dtype", "enable_prefix_caching", "engine"],
                     registry=registry)  # fmt: skip
        info.labels("16", "auto", "True", "0").set(1)
        self.counters = []
        for name, label, values in COUNTERS:
            counter = Counter(name, "Simulated.", base + ([label] if label else []), registry=registry)  # fmt: skip
            self.counters.extend(counter.labels(m, "0", *([v] if v else [])) for m in MODELS for v in values or [None])  # fmt: skip
        self.histograms = []
        for name, bounds in HISTOGRAMS:
            histogram = Histogram(name, "Simulated.", base, buckets=bounds, registry=registry)
            self.histograms.extend((histogram.labels(m, "0"), bounds) for m in MODELS)

    def advance(self) -> None:
        """What a few seconds of traffic does: counters grow, histograms observe, gauges move."""
        rng = self.rng
        for gauge in self.gauges:
            gauge.set(rng.randrange(0, 64))
        for counter in self.counters:
            counter.inc(rng.randrange(0, 500))
        for histogram, bounds in self.histograms:
            for _ in range(3):
                histogram.observe(rng.uniform(0, bounds[-1] / 4))

    def render(self, accept: str) -> tuple[bytes, str]:
        from prometheus_client.exposition import choose_encoder

        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type


class TargetHandler(BaseHTTPRequestHandler):
    """Serves ``/t/<i>/metrics`` from ``targets[i]``; a subclass may route other paths
    through ``send_target``."""

    targets: ClassVar[dict[int, SimulatedVllm]] = {}

    def do_GET(self) -> None:
        self.send_target(int(self.path.strip("/").split("/")[1]), 200)  # /t/<i>/metrics

    def send_target(self, index: int, status: int) -> None:
        """Advance ``targets[index]`` and send its exposition, in the encoding ``Accept`` picks."""
        target = self.targets[index]
        target.advance()
        body, content_type = target.render(self.headers.get("Accept", ""))
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    # NOTE: every target is scraped at once; the default listen backlog (5) would make most
    # connects wait for SYN retransmits (1 s, 3 s, ...).
    request_queue_size = 1024
    daemon_threads = True


def _serve(
    port_out: multiprocessing.SimpleQueue,  # type: ignore[type-arg]
    num_targets: int,
    handler: type[TargetHandler],
) -> None:
    handler.targets.update((i, SimulatedVllm(i)) for i in range(num_targets))
    server = _Server(("127.0.0.1", 0), handler)
    port_out.put(server.server_address[1])
    server.serve_forever()


@contextlib.contextmanager
def target_server(num_targets: int, handler: type[TargetHandler] = TargetHandler) -> Iterator[str]:
    """``num_targets`` simulated targets, served by ``handler`` in another process; yields
    the base URL. ``handler`` must be a module-level class (the process is spawned)."""
    context = multiprocessing.get_context("spawn")
    port_out = context.SimpleQueue()
    process = context.Process(target=_serve, args=(port_out, num_targets, handler), daemon=True)
    process.start()
    try:
        yield f"http://127.0.0.1:{port_out.get()}"
    finally:
        process.terminate()
        process.join(timeout=10)


@dataclass
class Result:
    backend: str
    protocols: str
    num_targets: int
    num_cycles: int
    series_per_target: int
    collector_cpu: float  # seconds over the measured cycles
    scrape_cpu: float  # of which: scrape + parse + normalise
    write_cpu: float  # of which: store writes
    server_cpu: float | None  # database server backends (PostgreSQL), None when not read
    wall: float

    @property
    def ms_per_target_scrape(self) -> float:
        return 1000 * self.collector_cpu / (self.num_targets * self.num_cycles)

    @property
    def targets_per_core(self) -> float:
        return self.num_targets * INTERVAL_SECONDS / (self.collector_cpu / self.num_cycles)


def _pg_backend_cpu(url: str) -> float | None:
    """User + system CPU seconds of the server processes connected to ``url``'s database,
    from /proc (None when they cannot be read, e.g. a server on another machine)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            pids = connection.execute(
                text(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid()"
                )
            ).scalars()
            pids = list(pids)
    finally:
        engine.dispose()
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def measure(
    backend: str, protocols: str, url: str, base_url: str, num_targets: int, num_cycles: int
) -> Result:
    from collectors.collector import Collector
    from collectors.scrape import Scraper, Target, accept_header
    from collectors.store import Store

    store = Store(url)
    targets = [Target(f"vllm-{i}", f"{base_url}/t/{i}/metrics") for i in range(num_targets)]
    spent = {"scrape": 0.0, "write": 0.0}

    class TimedStore:
        def write_scrapes(self, records):
            started = time.process_time()
            try:
                return store.write_scrapes(records)
            finally:
                spent["write"] += time.process_time() - started

    async def run() -> Result:
        now = [1_800_000_000.0]
        # NOTE: a generous timeout: the one simulated server renders every target's body in
        # turn, and on a busy machine the last answers of a cycle come late (wall time only).
        accept = accept_header(dict(PROTOCOLS)[protocols])
        async with Scraper(timeout_seconds=600, clock=lambda: now[0], accept=accept) as scraper:
            collector = Collector(targets, TimedStore(), scraper, interval_seconds=INTERVAL_SECONDS)
            collector.write_batch_size = max(collector.write_batch_size, num_targets)
            scrape_all = scraper.scrape_all

            async def timed_scrape_all(ts):
                started = time.process_time()
                try:
                    return await scrape_all(ts)
                finally:
                    spent["scrape"] += time.process_time() - started

            scraper.scrape_all = timed_scrape_all  # type: ignore[method-assign]
            records = await collector.run_once()  # warm-up: creates targets, series, layouts
            down = [r for r in records if not r.is_up]
            if down:
                raise RuntimeError(f"{len(down)} simulated targets down: {down[0].error}")
            series = len(records[0].samples) + len(records[0].histograms) + len(records[0].raw)
            spent["scrape"] = spent["write"] = 0.0
            server_before = _pg_backend_cpu(url) if backend == "postgresql" else None
            cpu_before, wall_before = time.process_time(), time.perf_counter()
            for _ in range(num_cycles):
                now[0] += INTERVAL_SECONDS
                await collector.run_once()
            cpu, wall = time.process_time() - cpu_before, time.perf_counter() - wall_before
            server = None
            if server_before is not None:
                after = _pg_backend_cpu(url)
                server = None if after is None else after - server_before
            if collector.num_buffered:
                raise RuntimeError(f"{collector.num_buffered} scrapes left unwritten")
            return Result(backend, protocols, num_targets, num_cycles, series, cpu, spent["scrape"],
                          spent["write"], server, wall)  # fmt: skip

    try:
        return asyncio.run(run())
    finally:
        store.close()


def _table(results: list[Result]) -> str:
    lines = [
        "| store | scrape protocols | targets | series/target | cycles | collector CPU/cycle (s) | "
        "scrape+parse+normalise ms/target | write ms/target | total ms/target | "
        "targets per core @ 5 s | DB server CPU/cycle (s) | wall/cycle (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        per = r.num_targets * r.num_cycles
        server = "not counted (in process)" if r.backend == "sqlite" else (
            "not readable" if r.server_cpu is None else f"{r.server_cpu / r.num_cycles:.2f}"
        )  # fmt: skip
        lines.append(
            f"| {r.backend} | {r.protocols} | {r.num_targets} | {r.series_per_target} | {r.num_cycles} | "
            f"{r.collector_cpu / r.num_cycles:.2f} | {1000 * r.scrape_cpu / per:.1f} | "
            f"{1000 * r.write_cpu / per:.1f} | {r.ms_per_target_scrape:.1f} | "
            f"{r.targets_per_core:.0f} | {server} | {r.wall / r.num_cycles:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    from collectors.scrape import ACCEPT_HEADER
    from collectors.store.connection import scratch_postgres_database

    num_targets = int(os.environ.get("TAILWATCH_BENCH_TARGETS", "100"))
    num_cycles = int(os.environ.get("TAILWATCH_BENCH_CYCLES", "3"))
    pg_url = os.environ.get("TAILWATCH_BENCH_PG_URL") or os.environ.get("TAILWATCH_TEST_PG_URL")
    print(f"{num_targets} simulated vLLM 0.33 targets x 2 models, {num_cycles} measured cycles "
          f"after one warm-up; interval {INTERVAL_SECONDS:g} s; CPU = time.process_time() of "
          "this process (the target server runs in another)")  # fmt: skip
    results = []
    with target_server(num_targets) as base_url, tempfile.TemporaryDirectory() as tmp:
        sample = SimulatedVllm(0)
        sample.advance()
        for accept in (ACCEPT_HEADER, "text/plain;version=0.0.4"):
            body, content_type = sample.render(accept)
            print(f"one exposition as {content_type.split(';')[0]}: "
                  f"{len(body.splitlines())} lines, {len(body)} bytes")  # fmt: skip
        for protocols, _ in PROTOCOLS:
            url = f"sqlite:///{tmp}/ingest-{protocols}.db"
            results.append(measure("sqlite", protocols, url, base_url, num_targets, num_cycles))
        if pg_url:
            for protocols, _ in PROTOCOLS:
                with scratch_postgres_database(pg_url, "tw_bench") as url:
                    results.append(
                        measure("postgresql", protocols, url, base_url, num_targets, num_cycles)
                    )
        else:
            print("PostgreSQL skipped: set TAILWATCH_BENCH_PG_URL (or TAILWATCH_TEST_PG_URL)")
    print(_table(results))
    for backend in ("sqlite", "postgresql"):
        by_protocols = {r.protocols: r for r in results if r.backend == backend}
        if len(by_protocols) == len(PROTOCOLS):
            ratio = by_protocols["openmetrics"].collector_cpu / by_protocols["text"].collector_cpu
            print(f"{backend}: collector CPU, OpenMetrics first / text 0.0.4 = {ratio:.2f}x")
    print("target of the issue: >= 200 targets per core at 5 s (<= 25 ms CPU per target-scrape)")


if __name__ == "__main__":
    main()
