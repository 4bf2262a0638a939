"""The run summary: latency percentiles, throughput, errors, goodput and SLO attainment.

Goodput and attainment are ``slo.request_goodput``'s (``vllm bench serve --goodput``
semantics); a dropped arrival counts as a failed request, so an overloaded client cannot
make attainment look better by not sending. Latencies are reported in milliseconds like
``vllm bench serve``; TPOT is ``(e2e - ttft) / (output_tokens - 1)`` per request with at
least two tokens; ITL percentiles are over every gap of every successful request.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from loadgen.errors import WorkloadError
from loadgen.record import RequestResult
from slo import Objectives, RequestRecord, request_goodput

PERCENTILES = (50, 90, 95, 99)
# --slo keys, as vllm bench serve spells them → Objectives fields
SLO_KEYS = {
    "ttft": "ttft_seconds",
    "tpot": "tpot_seconds",
    "e2el": "e2e_seconds",
    "itl": "itl_seconds",
}

_SLO_NAMES = {field: key for key, field in SLO_KEYS.items()}


def parse_slo(text: str) -> Objectives:
    """``"ttft=500,tpot=50,e2el=4000"`` (milliseconds) → ``Objectives`` in seconds."""
    thresholds: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in SLO_KEYS:
            raise WorkloadError("slo", f"{part!r}: expected KEY=MS with KEY in {list(SLO_KEYS)}")
        try:
            ms = float(value)
        except ValueError:
            raise WorkloadError(f"slo.{key}", f"{value!r} is not a number of ms") from None
        if not ms > 0:
            raise WorkloadError(f"slo.{key}", f"must be > 0 ms, got {value}")
        thresholds[SLO_KEYS[key]] = ms / 1000.0
    return Objectives(**thresholds)


def to_record(result: RequestResult) -> RequestRecord:
    """The ``slo`` view of one client result (failed ones carry zero latencies)."""
    return RequestRecord(
        succeeded=result.succeeded,
        ttft_seconds=result.ttft_seconds or 0.0,
        e2e_seconds=result.e2e_seconds or 0.0,
        output_tokens=result.output_tokens,
        prompt_tokens=result.prompt_tokens,
        max_itl_seconds=max(result.itl_seconds, default=0.0),
        tenant=result.tenant or "",
    )


def _stats_ms(values: Sequence[float]) -> dict[str, float | None]:
    if not len(values):
        return {"mean": None, **{f"p{p}": None for p in PERCENTILES}}
    array = np.asarray(values, dtype=float) * 1000.0
    stats = {"mean": float(array.mean())}
    stats.update({f"p{p}": float(np.percentile(array, p)) for p in PERCENTILES})
    return stats


def summarize(
    results: Sequence[RequestResult],
    duration_seconds: float,
    objectives: Objectives | None = None,
) -> dict[str, Any]:
    """The JSON summary of a run that lasted ``duration_seconds`` of wall time (> 0)."""
    objectives = objectives or Objectives()
    ok = [r for r in results if r.succeeded]
    records = [to_record(r) for r in results]
    goodput = request_goodput(records, objectives, duration_seconds)
    tpots = [rec.tpot_seconds for rec in map(to_record, ok) if rec.output_tokens > 1]
    errors = Counter(r.error or f"http_{r.status}" for r in results if not r.succeeded)
    prompt_tokens = sum(r.prompt_tokens for r in ok)
    output_tokens = sum(r.output_tokens for r in ok)
    return {
        "duration_seconds": duration_seconds,
        "num_scheduled": len(results),
        "num_sent": sum(not r.dropped for r in results),
        "num_dropped": sum(r.dropped for r in results),
        "num_succeeded": len(ok),
        "num_errors": len(results) - len(ok) - sum(r.dropped for r in results),
        "num_429": sum(r.status == 429 for r in results),
        "errors": dict(errors),
        "total_prompt_tokens": prompt_tokens,
        "total_output_tokens": output_tokens,
        "request_throughput": len(ok) / duration_seconds,
        "input_token_throughput": prompt_tokens / duration_seconds,
        "output_token_throughput": output_tokens / duration_seconds,
        "ttft_ms": _stats_ms([r.ttft_seconds for r in ok if r.ttft_seconds is not None]),
        "tpot_ms": _stats_ms(tpots),
        "itl_ms": _stats_ms([gap for r in ok for gap in r.itl_seconds]),
        "e2el_ms": _stats_ms([r.e2e_seconds for r in ok if r.e2e_seconds is not None]),
        "slo_ms": {_SLO_NAMES[k]: v * 1000.0 for k, v in objectives.given()},
        "num_good": goodput.num_good,
        "request_goodput": goodput.goodput_requests_per_second,
        "slo_attainment": goodput.attainment,
    }


def by_key(results: Sequence[RequestResult], key: str) -> Mapping[str, list[RequestResult]]:
    """Results grouped by an attribute (``replica``, ``tenant``, ``stream``)."""
    groups: dict[str, list[RequestResult]] = {}
    for r in results:
        groups.setdefault(str(getattr(r, key)), []).append(r)
    return groups


def headline(s: dict[str, Any]) -> str:
    """One line for a terminal."""

    def ms(stats, key):
        return "-" if stats[key] is None else f"{stats[key]:.1f}"

    return (
        f"{s['num_succeeded']}/{s['num_scheduled']} ok ({s['num_dropped']} dropped, "
        f"{s['num_errors']} errors, {s['num_429']} 429) · {s['request_throughput']:.2f} req/s · "
        f"TTFT p50/p99 {ms(s['ttft_ms'], 'p50')}/{ms(s['ttft_ms'], 'p99')} ms · "
        f"ITL p99 {ms(s['itl_ms'], 'p99')} ms · attainment {s['slo_attainment']:.3f} · "
        f"goodput {s['request_goodput']:.2f} req/s"
    )
