"""Serving overhead: the HTTP server against the in-process engine at the same open-loop load.

The same seeded Poisson workload is sent twice per load level: to an ``AsyncEngine`` in
this process (the engine loop with no HTTP, JSON or SSE), and to ``tailwatch engine
serve`` in a separate process through the real ``openai`` client, streaming. Both run
the tiny preset on CPU with one torch thread. TTFT is the time from a request's
scheduled arrival to its first non-empty text, the way ``vllm bench serve`` measures
it from streamed chunks; output tokens come from the engine's counts (``usage`` over
HTTP). Throughput is output tokens over the time from the first arrival to the last
completion, so at a load above capacity it is the sustained capacity.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import aclosing
from dataclasses import dataclass

import numpy as np
import openai

from bench._driver import setup_torch
from bench._report import nearest_rank, print_table
from engine.async_engine import AsyncEngine
from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams

# NOTE: the offered rates are these fractions of the in-process engine's capacity, measured
# at the start of the run (a burst queued at once), so one level is below and one above
# what the engine sustains on whatever machine runs it.
LOAD_FRACTIONS = (0.4, 1.5)
# two batches' worth (max_num_seqs 64), so the burst measures sustained throughput, not
# one batch that never queues
NUM_BURST_REQUESTS = 128
DURATION_SECONDS = 12.0
PROMPT_CHARS = 95  # + BOS = 96 tokens with the byte-level tokenizer
MAX_TOKENS = 64
KNOBS = {"max_model_len": 512, "max_num_seqs": 64}
SEED = 0


@dataclass
class Sample:
    ttft_seconds: float | None = None
    output_tokens: int = 0
    finished_at: float = 0.0


def _workload(rate: float) -> list[tuple[float, str]]:
    rng = np.random.default_rng(SEED)
    gaps = rng.exponential(1.0 / rate, size=int(rate * DURATION_SECONDS * 2))
    arrivals = np.cumsum(gaps)
    arrivals = arrivals[arrivals < DURATION_SECONDS]
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz ", dtype=np.uint8)
    return [(float(t), bytes(rng.choice(letters, PROMPT_CHARS)).decode()) for t in arrivals]


async def _replay(workload, send) -> tuple[list[Sample], float]:
    start = time.perf_counter()

    async def one(arrival: float, prompt: str) -> Sample:
        await asyncio.sleep(max(0.0, start + arrival - time.perf_counter()))
        sample = Sample()
        await send(prompt, sample, start + arrival)
        sample.finished_at = time.perf_counter()
        return sample

    samples = await asyncio.gather(*(one(t, p) for t, p in workload))
    return samples, max((s.finished_at for s in samples), default=start) - start


async def _in_process(front: AsyncEngine, workload):
    params = SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0, ignore_eos=True)

    async def send(prompt: str, sample: Sample, scheduled: float) -> None:
        async with aclosing(front.generate(prompt, params)) as stream:
            async for out in stream:
                if out.new_text and sample.ttft_seconds is None:
                    sample.ttft_seconds = time.perf_counter() - scheduled
                sample.output_tokens = out.num_output_tokens

    return await _replay(workload, send)


async def _over_http(base_url: str, workload):
    client = openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=600)

    async def send(prompt: str, sample: Sample, scheduled: float) -> None:
        stream = await client.completions.create(
            model="tiny",
            prompt=prompt,
            max_tokens=MAX_TOKENS,
            temperature=0.0,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].text and sample.ttft_seconds is None:
                sample.ttft_seconds = time.perf_counter() - scheduled
            if chunk.usage is not None:
                sample.output_tokens = chunk.usage.completion_tokens

    try:
        return await _replay(workload, send)
    finally:
        await client.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(port: int) -> subprocess.Popen:
    knobs = [f"--{k.replace('_', '-')}={v}" for k, v in KNOBS.items()]
    command = [sys.executable, "-m", "tailwatch.cli", "engine", "serve", "--model", "tiny"]
    command += ["--host", "127.0.0.1", f"--port={port}", "--device=cpu", *knobs]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=1) as r:
                if r.status == 200:
                    return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError(f"the server did not become ready: {server.stderr.read().decode()[-2000:]}")


def _row(name: str, rate: float, samples: list[Sample], makespan: float) -> tuple:
    ttfts = sorted(s.ttft_seconds for s in samples if s.ttft_seconds is not None)
    if not samples or not makespan > 0:
        return (name, f"{rate:g}", len(samples), "no samples: no request was sent", "-", "-")
    tokens = sum(s.output_tokens for s in samples)
    return (
        name,
        f"{rate:g}",
        len(samples),
        f"{tokens / makespan:.0f}",
        f"{nearest_rank(ttfts, 50) * 1000:.0f}",
        f"{nearest_rank(ttfts, 99) * 1000:.0f}",
    )


def main() -> None:
    threads = setup_torch()
    port = _free_port()
    server = _start_server(port)
    front = AsyncEngine(LLMEngine(EngineConfig(model="tiny", device="cpu", **KNOBS)))
    rows = []

    async def run() -> None:
        front.start()
        await front.warm_up()
        rate = 2 * NUM_BURST_REQUESTS / DURATION_SECONDS  # draws ~2x as many as needed
        burst = [(0.0, prompt) for _, prompt in _workload(rate)]
        samples, makespan = await _in_process(front, burst[:NUM_BURST_REQUESTS])
        capacity = sum(s.output_tokens for s in samples) / makespan / MAX_TOKENS
        print(
            f"in-process capacity: {capacity:.1f} req/s ({len(samples)} requests queued at "
            f"once); offering {', '.join(f'{f:g}x' for f in LOAD_FRACTIONS)} of it"
        )
        for rate in (max(round(f * capacity, 1), 0.1) for f in LOAD_FRACTIONS):
            workload = _workload(rate)
            samples, makespan = await _in_process(front, workload)
            rows.append(_row("in-process engine", rate, samples, makespan))
            samples, makespan = await _over_http(f"http://127.0.0.1:{port}/v1", workload)
            rows.append(_row("HTTP server (openai client, SSE)", rate, samples, makespan))

    print(
        f"tiny preset, CPU, {threads} torch thread(s) in each engine; Poisson arrivals for "
        f"{DURATION_SECONDS:.0f} s (seed {SEED}), 96-token prompts, {MAX_TOKENS} output "
        "tokens, greedy; the server runs in its own process on 127.0.0.1"
    )
    try:
        asyncio.run(run())
    finally:
        front.shutdown()
        server.terminate()
        server.wait(timeout=60)
    print_table(
        ("path", "req/s offered", "requests", "output tok/s", "TTFT p50 ms", "TTFT p99 ms"), rows
    )


if __name__ == "__main__":
    main()
