"""Observability overhead: output tokens/s at saturation with metrics and tracing on vs off.

Two ``AsyncEngine`` front ends over identical ``tiny`` engines, one with no observers
and tracing off, one with ``EngineMetrics`` (scraped every 5 s, Tailwatch's default
interval) and a ``RequestTracer`` sampling every request (ratio 1.0) and exporting
over OTLP/HTTP through the SDK's batch processor — the production path — to a sink in
a separate process on 127.0.0.1 (as a collector would be), so the figure is the
engine process's own cost. Each is held at saturation by a fixed number of closed-loop clients;
they take turns in short rounds so load from elsewhere on the machine falls on both
alike. Tokens are counted as clients receive them, within each round.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from contextlib import aclosing

from bench._driver import setup_torch
from bench._report import print_table, verdict
from bench._workload import BOS_TOKEN_ID
from engine.async_engine import AsyncEngine
from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.metrics import EngineMetrics
from engine.sampling_params import SamplingParams
from engine.tracing import RequestTracer, TracingConfig

CONCURRENCY = 48
ROUNDS = 6
ROUND_SECONDS = 5.0
SCRAPE_INTERVAL_SECONDS = 5.0
MAX_OVERHEAD = 0.03
PARAMS = SamplingParams(max_tokens=64, temperature=0.0, ignore_eos=True)
KNOBS = {"max_model_len": 512, "max_num_seqs": 64, "device": "cpu"}


# A separate process that accepts OTLP/HTTP exports on a free loopback port, discards
# them, and prints its port.
_SINK = """
import http.server, sys
class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def _prompt(i: int) -> list[int]:
    # distinct 96-token prompts (no shared prefix), the same set for both variants
    return [BOS_TOKEN_ID, *[(i * 7 + j) % 256 for j in range(95)]]


class Variant:
    def __init__(self, name: str, *, observed: bool, otlp_endpoint: str) -> None:
        self.name = name
        engine = LLMEngine(EngineConfig(**KNOBS))
        if observed:
            self.metrics: EngineMetrics | None = EngineMetrics("tiny", engine.knobs())
            self.tracer = RequestTracer.from_config(
                TracingConfig(otlp_endpoint=otlp_endpoint, sampling_ratio=1.0), "tiny"
            )
            observers = [self.metrics, self.tracer]
        else:
            self.metrics = None
            self.tracer = RequestTracer(None, "tiny")
            observers = []
        self.front = AsyncEngine(engine, observers=observers)
        self.tokens = 0
        self.seconds = 0.0
        self.num_requests = 0

    def _start_span(self, handle) -> None:
        self.tracer.start_request(handle, {}, "text_completion", {})

    async def round(self, seconds: float) -> None:
        deadline = time.perf_counter() + seconds
        started = time.perf_counter()

        async def client(i: int) -> int:
            received = 0
            while time.perf_counter() < deadline:
                stream = self.front.generate(_prompt(i), PARAMS, on_admitted=self._start_span)
                async with aclosing(stream):
                    async for out in stream:
                        if time.perf_counter() < deadline:
                            received += len(out.new_token_ids)
                self.num_requests += 1
            return received

        async def scraper() -> None:
            while time.perf_counter() < deadline:
                await asyncio.sleep(SCRAPE_INTERVAL_SECONDS)
                if self.metrics is not None and time.perf_counter() < deadline:
                    self.metrics.render("application/openmetrics-text")

        results = await asyncio.gather(*(client(i) for i in range(CONCURRENCY)), scraper())
        self.tokens += sum(results[:-1])
        self.seconds += deadline - started


async def _run(variants: list[Variant]) -> None:
    for v in variants:
        v.front.start()
        await v.front.warm_up()
        await v.round(1.0)  # warm caches and allocator; not counted
        v.tokens = v.num_requests = 0
        v.seconds = 0.0
    for _ in range(ROUNDS):
        for v in variants:
            await v.round(ROUND_SECONDS)


def main() -> None:
    threads = setup_torch()
    sink = subprocess.Popen([sys.executable, "-c", _SINK], stdout=subprocess.PIPE, text=True)
    assert sink.stdout is not None
    endpoint = f"http://127.0.0.1:{int(sink.stdout.readline())}/v1/traces"
    variants = [
        Variant("metrics + tracing off", observed=False, otlp_endpoint=endpoint),
        Variant("metrics + tracing (ratio 1.0) on", observed=True, otlp_endpoint=endpoint),
    ]
    print(
        f"tiny preset, CPU, {threads} torch thread(s); {CONCURRENCY} closed-loop clients, "
        f"96-token prompts, 64 output tokens; {ROUNDS} rounds x {ROUND_SECONDS:.0f} s per "
        "variant, alternating; traces exported over OTLP/HTTP to a sink process on 127.0.0.1"
    )
    try:
        asyncio.run(_run(variants))
    finally:
        for v in variants:
            v.front.shutdown()
            v.tracer.shutdown()
        sink.terminate()
        sink.wait(timeout=10)
    rows = [
        (v.name, f"{v.tokens / v.seconds:.0f}", v.num_requests, f"{v.seconds:.0f}")
        for v in variants
    ]
    print_table(("variant", "output tok/s", "requests", "seconds"), rows)
    off, on = (v.tokens / v.seconds for v in variants)
    overhead = 1 - on / off
    print(
        f"throughput lower with observability on: {overhead * 100:.1f}% "
        f"(target <= {MAX_OVERHEAD * 100:.0f}%: {verdict(-overhead, -MAX_OVERHEAD)})"
    )


if __name__ == "__main__":
    main()
