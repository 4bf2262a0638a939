"""A mode's goodput knee: the highest arrival rate at which it still meets the SLO for
90% of requests (DistServe's definition), searched with ``loadgen.sweep.find_knee``.

Each probe replays the same seeded workload shape at one rate for a fixed window of
arrivals, open loop, on a fresh engine, and waits for its requests to finish (up to a
drain allowance; a request unfinished by then misses the SLO). The search starts from a rate derived from the
mode's measured capacity, so it brackets the knee on any machine within a few probes.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Callable
from dataclasses import replace

from bench._driver import RunResult
from bench._report import Slo, goodput_per_second, nearest_rank
from bench._workload import RequestSpec, WorkloadSpec, make_workload
from loadgen.sweep import KneeResult, find_knee

TARGET_ATTAINMENT = 0.9
# requests in the shared base workload: enough for 8 s probes up to ~250 req/s
BASE_REQUESTS = 2000


def workload_at(spec: WorkloadSpec, rate: float, seconds: float) -> list[RequestSpec]:
    """``spec``'s requests arriving at ``rate`` per second for ``seconds``.

    Every rate replays the same requests (lengths and prompts) on the same unit-rate Poisson
    arrivals scaled by 1/rate (common random numbers), so attainment differs between
    probes by the rate, not by which long requests a new draw happened to contain.

    NOTE: a probe must last many batch lifetimes: a short burst of requests fits in one
    batch and meets the SLO at any rate, so the knee would never be found."""
    base = _unit_rate_workload(spec, max(BASE_REQUESTS, math.ceil(1.2 * rate * seconds)))
    return [
        r._replace(arrival_seconds=r.arrival_seconds / rate)
        for r in base
        if r.arrival_seconds / rate < seconds
    ]


@functools.lru_cache(maxsize=4)
def _unit_rate_workload(spec: WorkloadSpec, num_requests: int) -> tuple[RequestSpec, ...]:
    return tuple(
        make_workload(replace(spec, arrival_rate_per_second=1.0, duration_seconds=num_requests))
    )


def attainment(result: RunResult, slo: Slo) -> float:
    """Share of the requests that arrived which finished within ``slo`` (0 with none)."""
    if not result.records:
        return 0.0
    return sum(1 for r in result.records if slo.is_met_by(r)) / len(result.records)


def goodput_knee(
    run_at: Callable[[float], RunResult],
    slo: Slo,
    *,
    start_rate: float,
    max_probes: int,
) -> KneeResult:
    """Bracket and bisect the rate at which ``run_at(rate)`` holds 90% SLO attainment."""

    async def probe(rate: float) -> dict:
        result = run_at(rate)
        ttfts = [r.ttft_seconds for r in result.records if r.ttft_seconds is not None]
        return {
            "slo_attainment": attainment(result, slo),
            "request_goodput": goodput_per_second(result, slo),
            "output_token_throughput": result.output_tokens_per_second,
            "num_scheduled": len(result.records),
            "ttft_ms": {q: nearest_rank(ttfts, n) * 1000 for q, n in (("p95", 95), ("p99", 99))},
        }

    return asyncio.run(
        find_knee(
            probe,
            start_rate=start_rate,
            target=TARGET_ATTAINMENT,
            max_probes=max_probes,
            relative_tolerance=0.15,
        )
    )


def describe_knee(knee: KneeResult) -> str:
    """``knee`` as table text: the rate, or why there is none."""
    if knee.knee_rate is None:
        lowest = min((r["rate"] for r in knee.rows), default=float("nan"))
        return f"< {lowest:.2g} (no probed rate met it)"
    if knee.first_failing_rate is None:
        return f">= {knee.knee_rate:.3g} (never failed)"
    return f"{knee.knee_rate:.3g}"
