"""Replay against production: both sides as ``loadgen.summary`` results of the same
requests, their differences, and the bounded samples a lab point keeps.

A production record succeeded when it has no error, a good finish reason (or none) and
both TTFT and e2e; a bundled-engine replay is timed by the engine's own records (its spans)
where it kept one, so both sides are measured at the server. Records carry no per-token
times: production's ITL stays unknown.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from collectors.request_records import RequestRecord
from loadgen.record import RequestResult
from loadgen.replay_trace import ReplayTrace
from slo import tpot_seconds
from slo.outcomes import Outcome, finished_reason_outcome

#: The most per-request figures a lab point keeps of each kind (evenly thinned past it).
MAX_SAMPLES = 2000
COMPARED = ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")
QUANTILES = ("p50", "p95", "p99")


def production_results(trace: ReplayTrace) -> list[RequestResult]:
    """The replayed requests as production served them, in ``summarize``'s terms: a record
    succeeded when it has no error, a good finish reason (or none), and TTFT and e2e."""
    return [_production_result(r.index, r.offset_seconds, r.record) for r in trace.requests]


def _production_result(index: int, offset: float, record: RequestRecord) -> RequestResult:
    reason = record.finish_reason
    ok = (
        not record.is_error
        and (reason is None or finished_reason_outcome(reason) is Outcome.GOOD)
        and record.ttft_seconds is not None
        and record.e2e_seconds is not None
    )
    return RequestResult(
        index,
        offset,
        sent_seconds=offset,
        ttft_seconds=record.ttft_seconds,
        e2e_seconds=record.e2e_seconds,
        prompt_tokens=record.input_tokens or 0,
        output_tokens=record.output_tokens or 0,
        status=200 if ok else 0,
        error="" if ok else (reason or "error"),
        replica=record.replica or "",
        tenant=record.tenant,
        response_id=record.request_id,
        finish_reason=reason or "",
    )


def server_side(
    results: Sequence[RequestResult], records: Sequence[RequestRecord] | None
) -> list[RequestResult]:
    """``results`` timed by the engine's own records where it kept one (matched by response
    id; ITL stays the client's, the records have no per-token times); the client's result
    where it did not (a request refused or failed before the engine). ``records`` None: the
    client's results as they are."""
    if records is None:
        return list(results)
    by_id = {r.request_id: r for r in records}
    out = []
    for result in results:
        record = by_id.get(result.response_id) if result.response_id else None
        if record is None:
            out.append(result)
            continue
        timed = _production_result(result.index, result.scheduled_seconds, record)
        timed.itl_seconds = list(result.itl_seconds)
        if not result.succeeded:  # NOTE: what the client saw fail, failed
            timed.status, timed.error = result.status, result.error or "error"
        out.append(timed)
    return out


def difference(replay: Mapping[str, Any], production: Mapping[str, Any]) -> dict[str, Any]:
    """Replay against production for each compared quantile, attainment and goodput:
    ``{"replay", "production", "difference", "ratio"}`` (None where a side is unknown)."""
    out: dict[str, Any] = {}
    for metric in COMPARED:
        for q in QUANTILES:
            out[f"{metric}.{q}"] = _pair(replay[metric][q], production[metric][q])
    for key in ("slo_attainment", "request_goodput", "request_throughput", "total_cached_tokens"):
        out[key] = _pair(replay.get(key), production.get(key))
    return out


def _pair(replay: float | None, production: float | None) -> dict[str, float | None]:
    known = [v for v in (replay, production) if v is not None and math.isfinite(v)]
    if len(known) < 2:
        return {"replay": replay, "production": production, "difference": None, "ratio": None}
    assert replay is not None and production is not None
    ratio = replay / production if production else None
    return {
        "replay": replay,
        "production": production,
        "difference": replay - production,
        "ratio": ratio,
    }


def cached_tokens(records: Iterable[RequestRecord]) -> int | None:
    """Prompt tokens served from the prefix cache; None when no record says."""
    counts = [r.cached_tokens for r in records if r.cached_tokens is not None]
    return sum(counts) if counts else None


def samples(
    replay: Sequence[RequestResult], production: Sequence[RequestResult]
) -> dict[str, list[float]]:
    """Per-request figures in ms for bootstraps, at most :data:`MAX_SAMPLES` of each."""
    out: dict[str, list[float]] = {}
    for prefix, results in (("", replay), ("production_", production)):
        ok = [r for r in results if r.succeeded]
        timed = [r for r in ok if r.ttft_seconds is not None and r.e2e_seconds is not None]
        out[f"{prefix}ttft_ms"] = _thin([r.ttft_seconds * 1000 for r in timed])  # type: ignore[operator]
        out[f"{prefix}e2e_ms"] = _thin([r.e2e_seconds * 1000 for r in timed])  # type: ignore[operator]
        out[f"{prefix}tpot_ms"] = _thin(
            [
                tpot_seconds(r.e2e_seconds, r.ttft_seconds, r.output_tokens) * 1000
                for r in timed
                if r.output_tokens > 1
            ]
        )
    out["itl_ms"] = _thin([gap * 1000 for r in replay if r.succeeded for gap in r.itl_seconds])
    return out


def _thin(values: list[float]) -> list[float]:
    if len(values) <= MAX_SAMPLES:
        return values
    step = len(values) / MAX_SAMPLES
    return [values[int(i * step)] for i in range(MAX_SAMPLES)]
