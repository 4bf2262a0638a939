"""A mode's goodput knee: the highest arrival rate at which it still meets the SLO for
90% of requests (DistServe's definition), searched with ``loadgen.sweep.find_knee``.

Each probe replays the same seeded workload shape at one rate for a fixed window of
arrivals, open loop, on a fresh engine, and waits for its requests to finish (up to a
drain allowance; a request unfinished by then misses the SLO). The search starts from a rate derived from the
mode's measured capacity, so it brackets the knee on any machine within a few probes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from bench._driver import RunResult
from bench._report import Slo, nearest_rank
from bench._workload import RequestSpec, WorkloadSpec, make_workload
from loadgen.sweep import KneeResult, find_knee

TARGET_ATTAINMENT = 0.9


def workload_at(spec: WorkloadSpec, rate: float, seconds: float) -> list[RequestSpec]:
    """``spec``'s lengths arriving at ``rate`` per second for ``seconds``.

    NOTE: a probe must last many batch lifetimes: a short burst of requests fits in one
    batch and meets the SLO at any rate, so the knee would never be found."""
    return make_workload(replace(spec, arrival_rate_per_second=rate, duration_seconds=seconds))


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
        good = attainment(result, slo) * len(result.records)
        return {
            "slo_attainment": attainment(result, slo),
            "request_goodput": good / result.elapsed_seconds if result.elapsed_seconds else 0.0,
            "output_token_throughput": result.output_tokens_per_second
            if result.elapsed_seconds
            else 0.0,
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
