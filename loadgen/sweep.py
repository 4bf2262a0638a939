"""Rate sweeps: a list of rates, or a search for the knee.

The knee is the highest rate whose SLO attainment stays at or above a target (0.9 by
default, DistServe's definition). The search first brackets it (doubling the rate from a
start until attainment falls below target), then bisects the bracket, within a bounded
number of probes. Attainment is not perfectly monotonic in rate under noise; the search
reports the best passing rate it measured, with the failing rate above it.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from loadgen.admin import read_knobs
from loadgen.routing import Router
from loadgen.runner import run_schedule
from loadgen.summary import parse_slo, summarize
from loadgen.workload import Workload, build_schedule

# rate → summary row (must hold "slo_attainment")
Probe = Callable[[float], Awaitable[dict[str, Any]]]

ROW_FIELDS = (
    "rate", "slo_attainment", "request_goodput", "request_throughput",
    "output_token_throughput", "ttft_p95_ms", "ttft_p99_ms", "itl_p95_ms", "itl_p99_ms",
    "num_scheduled", "num_dropped", "num_errors", "num_429",
)  # fmt: skip


def row_from_summary(rate: float, summary: dict[str, Any]) -> dict[str, Any]:
    """One table row; a latency a probe did not measure (e.g. ITL, for a benchmark that
    times only first and last tokens) is left out rather than invented."""
    row = {"rate": rate, **{k: summary[k] for k in ROW_FIELDS if k in summary}}
    for latency in ("ttft", "itl"):
        for q in ("p95", "p99"):
            if q in summary.get(f"{latency}_ms", {}):
                row[f"{latency}_{q}_ms"] = summary[f"{latency}_ms"][q]
    return row


def _passes(row: dict[str, Any], target: float) -> bool:
    attainment = row["slo_attainment"]
    return not math.isnan(attainment) and attainment >= target


async def sweep_rates(rates: Sequence[float], probe: Probe) -> list[dict[str, Any]]:
    return [row_from_summary(rate, await probe(rate)) for rate in rates]


@dataclass(frozen=True)
class KneeResult:
    knee_rate: float | None  # highest passing rate measured; None when even the lowest failed
    first_failing_rate: float | None  # lowest failing rate above it; None: never failed
    rows: list[dict[str, Any]]


async def find_knee(
    probe: Probe,
    *,
    start_rate: float,
    target: float = 0.9,
    max_probes: int = 8,
    relative_tolerance: float = 0.1,
    max_rate: float = 1e4,
) -> KneeResult:
    """Bracket then bisect; stops when the bracket is within ``relative_tolerance`` of its
    upper end or ``max_probes`` rates were measured."""
    if not start_rate > 0:
        raise ValueError(f"start_rate must be > 0, got {start_rate}")
    if not 0 < target <= 1:
        raise ValueError(f"target must be in (0, 1], got {target}")
    if max_probes < 2:
        raise ValueError(f"max_probes must be >= 2, got {max_probes}")
    rows: list[dict[str, Any]] = []

    async def measure(rate: float) -> bool:
        row = row_from_summary(rate, await probe(rate))
        rows.append(row)
        return _passes(row, target)

    low: float | None = None
    high: float | None = None
    rate = start_rate
    # bracket: halve down until a pass, or double up until a fail
    if await measure(rate):
        low = rate
        while len(rows) < max_probes and rate * 2 <= max_rate:
            rate *= 2
            if await measure(rate):
                low = rate
            else:
                high = rate
                break
    else:
        high = rate
        while len(rows) < max_probes:
            rate /= 2
            if await measure(rate):
                low = rate
                break
            high = rate
    while low is not None and high is not None and len(rows) < max_probes:
        if (high - low) <= relative_tolerance * high:
            break
        middle = (low + high) / 2
        if await measure(middle):
            low = middle
        else:
            high = middle
    rows.sort(key=lambda r: r["rate"])
    return KneeResult(low, high, rows)


def write_table(
    rows: list[dict[str, Any]],
    knobs: dict[str, Any],
    stem: str | Path,
    knee: KneeResult | None = None,
) -> tuple[Path, Path]:
    """``stem.json`` (rows, knobs per replica) and ``stem.csv`` (one row per rate, the
    knobs of the first replica that exposed them as extra ``knob.*`` columns). A knee
    search adds ``knee_rate`` and ``first_failing_rate`` to the JSON."""
    stem = Path(stem)
    json_path, csv_path = stem.with_suffix(".json"), stem.with_suffix(".csv")
    document: dict[str, Any] = {"knobs": knobs, "rows": rows}
    if knee is not None:
        document["knee_rate"] = knee.knee_rate
        document["first_failing_rate"] = knee.first_failing_rate
    json_path.write_text(json.dumps(document, indent=2) + "\n")
    first = next((k for k in knobs.values() if k), {}) or {}
    columns = [*ROW_FIELDS, *(f"knob.{name}" for name in first)]
    with csv_path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, **{f"knob.{k}": v for k, v in first.items()}})
    return json_path, csv_path


async def run_sweep(
    urls: Sequence[str],
    workload: Workload,
    rates: Sequence[float],
    *,
    slo: str = "",
    routing: str = "round-robin",
    route: str = "/v1/completions",
    max_in_flight: int = 256,
    start_rate: float = 1.0,
    target: float = 0.9,
    max_probes: int = 8,
) -> tuple[list[dict[str, Any]], KneeResult | None, dict[str, Any]]:
    """Run ``workload`` at each of ``rates`` (or search the knee when ``rates`` is empty),
    one fresh open-loop run per rate; returns (rows, the knee or None, knobs per URL)."""
    objectives = parse_slo(slo)
    async with httpx.AsyncClient() as client:
        knobs = {url: await read_knobs(client, url) for url in urls}

    async def probe(rate: float) -> dict[str, Any]:
        schedule = build_schedule(
            [replace(workload, arrivals=replace(workload.arrivals, rate_per_second=rate))]
        )
        state = await run_schedule(
            urls, schedule, router=Router(urls, routing), route=route, max_in_flight=max_in_flight
        )
        return summarize(state.results, max(state.duration_seconds, 1e-9), objectives)

    if rates:
        return await sweep_rates(rates, probe), None, knobs
    knee = await find_knee(probe, start_rate=start_rate, target=target, max_probes=max_probes)
    return knee.rows, knee, knobs
