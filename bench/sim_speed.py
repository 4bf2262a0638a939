"""Simulator speed (issue 15): simulated requests per CPU-second on a virtual clock.

``sim:llama-3.1-8b@h100`` (default knobs) serves Poisson arrivals of 1024-token prompts
and 256-token outputs. At 20 req/s that is near the knee of this shape on this GPU:
TTFT p99 stays near 0.15 s at 20 req/s and climbs past a second by 30 (the table shows
both rates, measured in the same run). CPU seconds are ``time.process_time`` of the
run alone (workload generation excluded; building the engine, with its 24k-block KV
pool, included), so other load on the machine moves them less than it moves wall time.
The hour-long figure is the engine's construction (measured on its own: its KV pool
is built once per run, not once per 30 s) plus the rest of the run's CPU time scaled
linearly to an hour's requests (the cost is per step and per token, and a steady load
has steady batches); the 20 req/s row runs 120 simulated seconds. The last row is
the same 20 req/s schedule's first 30 s through the per-step path (``fast=False``: every
step ``LLMEngine.step()``), the reference the fast path is pinned to.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

from bench._report import print_table
from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.sim.offline import run_open_loop
from engine.sim.runner import VirtualClock
from engine.sim.workload import RequestShape, poisson_schedule

MODEL = "sim:llama-3.1-8b@h100"
SHAPE = RequestShape(num_prompt_tokens=1024, max_tokens=256)
HOUR_SECONDS = 3600.0
TARGET_RATE_PER_SECOND = 20.0
TARGET_CPU_SECONDS_PER_HOUR = 60.0


class Case(NamedTuple):
    path: str  # "fast" or "per-step"
    rate_per_second: float
    simulated_seconds: float


CASES = (
    Case("fast", TARGET_RATE_PER_SECOND, 120.0),
    Case("fast", 30.0, 30.0),
    Case("per-step", TARGET_RATE_PER_SECOND, 30.0),
)


def _quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``; NaN for none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    config = EngineConfig(model=MODEL, max_model_len=4096)
    started = time.process_time()
    LLMEngine(config, clock=VirtualClock())
    build_cpu_seconds = time.process_time() - started
    rows = []
    hour_cpu_seconds = {}
    for case in CASES:
        arrivals = poisson_schedule(case.rate_per_second, case.simulated_seconds, [SHAPE], seed=0)
        started = time.process_time()
        run = run_open_loop(config, arrivals, fast=case.path == "fast")
        # NOTE: a coarse process clock can read 0 for a fast run; a run with no finished
        # request has no speed to report
        cpu_seconds = max(time.process_time() - started, 1e-6)
        if not run.results:
            raise SystemExit(f"sim_speed: no request finished at {case.rate_per_second:g} req/s")
        requests_per_cpu_second = len(run.results) / cpu_seconds
        hour_requests = case.rate_per_second * HOUR_SECONDS
        run_cpu_seconds = max(cpu_seconds - build_cpu_seconds, 0.0)
        hour = build_cpu_seconds + run_cpu_seconds * hour_requests / len(run.results)
        hour_cpu_seconds[case] = hour
        ttft = [r.ttft_seconds for r in run.results]
        itl = [x for r in run.results for x in r.itl_seconds]
        rows.append(
            [
                case.path,
                f"{case.rate_per_second:g}",
                len(run.results),
                run.num_steps,
                f"{run.simulated_seconds:.1f}",
                f"{_quantile(ttft, 0.5) * 1000:.0f} / {_quantile(ttft, 0.99) * 1000:.0f}",
                f"{_quantile(itl, 0.5) * 1000:.1f} / {_quantile(itl, 0.99) * 1000:.1f}",
                f"{cpu_seconds:.2f}",
                f"{requests_per_cpu_second:.0f}",
                f"{run.num_steps / cpu_seconds:.0f}",
                f"{hour:.0f}",
                f"{TARGET_CPU_SECONDS_PER_HOUR:.0f}",
            ]
        )
    print(
        f"{MODEL}, prompts {SHAPE.num_prompt_tokens} / outputs {SHAPE.max_tokens} tokens; "
        f"building the engine: {build_cpu_seconds:.2f} CPU s (in each run's CPU s)"
    )
    print_table(
        [
            "path",
            "req/s",
            "requests",
            "steps",
            "simulated s",
            "TTFT p50/p99 ms",
            "ITL p50/p99 ms",
            "CPU s",
            "req / CPU-s",
            "steps / CPU-s",
            "CPU s for 1 h",
            "target CPU s for 1 h",
        ],
        rows,
    )
    hour = hour_cpu_seconds[CASES[0]]
    reference = hour_cpu_seconds[CASES[2]]
    verdict = "under" if hour < TARGET_CPU_SECONDS_PER_HOUR else "NOT under"
    print(
        f"an hour of {TARGET_RATE_PER_SECOND:g} req/s traffic: ~{hour:.0f} CPU s, {verdict} "
        f"a minute (target {TARGET_CPU_SECONDS_PER_HOUR:.0f} s); the per-step path: "
        f"~{reference:.0f} CPU s ({reference / hour:.1f}x)"
    )
