"""Request records and trace spans as plain frames: the request table, the slowest requests,
request-level goodput (exact, ``slo.request_goodput``) and a trace's waterfall.

Pure reads through :class:`collectors.store.RequestReader`; no Streamlit, no SQL.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from collectors.request_records import RequestRecord, SpanRecord
from collectors.store.protocols import RequestReader
from slo import (
    GoodputResult,
    LatencyIndicator,
    LatencyMetric,
    Objectives,
    SLOSpec,
    is_good,
    request_goodput,
)
from slo import RequestRecord as GoodputRecord
from slo.outcomes import Outcome, finished_reason_outcome

#: Most records a page reads per window (the store's own default cap).
RECORD_LIMIT = 10_000
TRACE_ID = re.compile(r"[0-9a-fA-F]{32}")
#: A request id as engines write them (``chatcmpl-…``, ``cmpl-…``, a UUID): printable, short.
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
REQUEST_COLUMNS = [
    "arrival", "request_id", "trace_id", "tenant", "model", "replica", "finish_reason",
    "queue_ms", "ttft_ms", "e2e_ms", "input_tokens", "output_tokens", "preemptions",
    "instance_id",
]  # fmt: skip

# Span event names of the bundled engine (docs/tracing.md, "Events").
EVENT_SCHEDULED = "tailwatch.request.scheduled"
EVENT_PREFILL_CHUNK = "tailwatch.request.prefill_chunk"
EVENT_FIRST_TOKEN = "tailwatch.request.first_token"
EVENT_PREEMPTED = "tailwatch.request.preempted"
#: Events that end a running prefill chunk.
_PHASE_MARKS = (EVENT_PREFILL_CHUNK, EVENT_FIRST_TOKEN, EVENT_PREEMPTED)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None or not math.isfinite(seconds) else seconds * 1000.0


def read_requests(
    reader: RequestReader,
    start: float,
    end: float,
    *,
    tenant: str | None = None,
    model: str | None = None,
    replicas: Iterable[str] | None = None,
    limit: int = RECORD_LIMIT,
) -> list[RequestRecord]:
    """Records that arrived in ``[start, end]``; ``replicas`` (engine instance ids, one
    target's) keeps only theirs, ``None`` keeps all."""
    records = reader.requests(start, end, tenant=tenant, model=model, limit=limit)
    if replicas is None:
        return records
    wanted = set(replicas)
    return [r for r in records if r.replica in wanted]


def replica_name(record: RequestRecord, names: Mapping[str, str]) -> str:
    """The replica as every other page names it, its scrape target (``replica-0``), from
    ``names`` (engine instance id → target); the stored id where no target is known."""
    return names.get(record.replica or "", record.replica or "")


def request_frame(
    records: Sequence[RequestRecord], names: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """One row per record, times in ms, strings as stored (the page shows them as text).
    ``replica`` is the target's name where ``names`` (instance id → target) knows it;
    ``instance_id`` keeps the engine's own id (its spans' ``service.instance.id``)."""
    names = names or {}
    rows = [
        (
            pd.Timestamp(r.arrival, unit="s", tz="UTC"),
            r.request_id,
            r.trace_id,
            r.tenant or "",
            r.model or "",
            replica_name(r, names),
            r.finish_reason or ("error" if r.is_error else ""),
            _ms(r.queue_seconds),
            _ms(r.ttft_seconds),
            _ms(r.e2e_seconds),
            r.input_tokens,
            r.output_tokens,
            r.preemptions,
            r.replica or "",
        )
        for r in records
    ]
    return pd.DataFrame(rows, columns=REQUEST_COLUMNS)


def slowest(records: Sequence[RequestRecord], limit: int = 10) -> list[RequestRecord]:
    """The ``limit`` records with the longest e2e (unknown e2e last), ties by request id."""

    def key(r: RequestRecord) -> tuple[float, str]:
        e2e = r.e2e_seconds
        return (-(e2e if e2e is not None and math.isfinite(e2e) else -math.inf), r.request_id)

    return sorted(records, key=key)[: max(0, limit)]


def succeeded(record: RequestRecord) -> bool:
    """A record that finished well: no error, and a finish reason that is not a failure."""
    if record.is_error:
        return False
    return record.finish_reason is None or finished_reason_outcome(record.finish_reason) is (
        Outcome.GOOD
    )


def goodput_records(records: Iterable[RequestRecord]) -> list[GoodputRecord]:
    """Records as ``slo.RequestRecord`` for :func:`slo.request_goodput`; a record without
    TTFT or e2e (an aborted request) is a failed one."""
    out = []
    for r in records:
        ttft, e2e = r.ttft_seconds, r.e2e_seconds
        ok = succeeded(r) and ttft is not None and e2e is not None
        out.append(
            GoodputRecord(
                succeeded=ok,
                ttft_seconds=ttft if ttft is not None else math.inf,
                e2e_seconds=e2e if e2e is not None else math.inf,
                output_tokens=r.output_tokens or 0,
                prompt_tokens=r.input_tokens or 0,
                tenant=r.tenant or "",
                model=r.model or "",
            )
        )
    return out


def exact_goodput(
    records: Sequence[RequestRecord], objectives: Objectives, duration_seconds: float
) -> GoodputResult:
    """``slo.request_goodput`` over the records (exact: every request judged)."""
    return request_goodput(goodput_records(records), objectives, duration_seconds)


@dataclass(frozen=True)
class WaterfallBar:
    """One bar of a trace's waterfall: ``phase`` from ``start_ms`` to ``end_ms`` after the
    request's arrival (a preemption is a zero-length mark)."""

    phase: str
    start_ms: float
    end_ms: float
    detail: str


def waterfall(span: SpanRecord) -> list[WaterfallBar]:
    """Queue, each prefill chunk, decode and preemptions of one request span, from its
    events (docs/tracing.md): queue = arrival → scheduled; a prefill chunk runs from its
    event (when it was scheduled) to the next mark (the next chunk, a preemption or the first
    token); decode = first token → span end; a preemption is a mark. Without events: one bar
    for the whole span."""
    t0 = span.start

    def ms(t: float) -> float:
        return (t - t0) * 1000.0

    events = sorted(span.events, key=lambda e: e.time)
    marks = [e.time for e in events if e.name in _PHASE_MARKS] + [span.end]
    bars: list[WaterfallBar] = []
    first_token: float | None = None
    for event in events:
        if event.name == EVENT_SCHEDULED:
            bars.append(WaterfallBar("queue", 0.0, ms(event.time), "arrival → scheduled"))
        elif event.name == EVENT_PREFILL_CHUNK:
            index = event.attributes.get("tailwatch.prefill.chunk_index", "?")
            tokens = event.attributes.get("tailwatch.prefill.num_tokens", "?")
            end = next((t for t in marks if t > event.time), span.end)
            bars.append(
                WaterfallBar(f"prefill chunk {index}", ms(event.time), ms(end), f"{tokens} tokens")
            )
        elif event.name == EVENT_FIRST_TOKEN:
            first_token = event.time
        elif event.name == EVENT_PREEMPTED:
            index = event.attributes.get("tailwatch.preemption.index", "?")
            bars.append(
                WaterfallBar(f"preempted {index}", ms(event.time), ms(event.time), "preemption")
            )
    if first_token is not None:
        bars.append(WaterfallBar("decode", ms(first_token), ms(span.end), "first → last token"))
    if not bars:
        bars.append(WaterfallBar(span.name, 0.0, ms(span.end), "no phase events on this span"))
    return bars


def waterfall_frame(spans: Sequence[SpanRecord]) -> pd.DataFrame:
    """``span, phase, start_ms, end_ms, detail`` for every span of a trace (its root's
    arrival is 0 for all of them)."""
    if not spans:
        return pd.DataFrame(columns=["span", "phase", "start_ms", "end_ms", "detail"])
    t0 = min(s.start for s in spans)
    rows = []
    for span in spans:
        offset = (span.start - t0) * 1000.0
        for bar in waterfall(span):
            rows.append(
                (span.name, bar.phase, bar.start_ms + offset, bar.end_ms + offset, bar.detail)
            )
    return pd.DataFrame(rows, columns=["span", "phase", "start_ms", "end_ms", "detail"])


def good_flags(records: Sequence[RequestRecord], specs: Sequence[SLOSpec]) -> list[bool]:
    """Per record: succeeded and met every latency SLO whose selector matches its model and
    tenant (TTFT, TPOT, e2e; ITL SLOs need the worst gap, which records do not keep)."""
    flags = []
    for judged in goodput_records(records):
        applicable = [
            s.indicator.objectives
            for s in specs
            if isinstance(s.indicator, LatencyIndicator)
            and s.indicator.metric is not LatencyMetric.ITL
            and s.selector.matches(judged.model or None, judged.tenant or None, None)
        ]
        flags.append(judged.succeeded and all(is_good(judged, o) for o in applicable))
    return flags


def exact_attainment(records: Sequence[RequestRecord], spec: SLOSpec) -> tuple[float, int] | None:
    """``(attainment, requests judged)`` of a latency SLO over the records its selector
    matches, exactly (every request judged, ``slo.request_goodput``); ``None`` for an
    error-ratio or ITL SLO (records keep no worst gap) or when no record matches."""
    indicator = spec.indicator
    if not isinstance(indicator, LatencyIndicator) or indicator.metric is LatencyMetric.ITL:
        return None
    judged = [
        g
        for g in goodput_records(records)
        if spec.selector.matches(g.model or None, g.tenant or None, None)
    ]
    if not judged:
        return None
    result = request_goodput(judged, indicator.objectives, 1.0)
    return result.attainment, result.num_requests
