"""``FakeRequestReader``: the :class:`~collectors.store.protocols.RequestReader` (and
:class:`~collectors.store.protocols.TraceStore`) over plain in-memory records.

It keeps what the SQL store keeps, and gives back what the store gives back: one record per
``(trace_id, span_id)`` (the first written), ids in lowercase, names cut to the store's
column sizes, a non-finite latency as ``None``, attributes as JSON reads them back (tuples as
lists, bytes as hex). ``tests/collectors/test_reader_contract.py`` proves that the two agree.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from collectors.request_records import RequestRecord, SpanEvent, SpanRecord

#: The store's column sizes: names (255) and the finish reason (64).
_NAME, _SHORT = 255, 64
_LATENCIES = (
    "queue_seconds",
    "ttft_seconds",
    "prefill_seconds",
    "decode_seconds",
    "tpot_seconds",
    "e2e_seconds",
)


class FakeRequestReader:
    """Request records and spans in plain lists: a :class:`RequestReader` without a database."""

    def __init__(
        self, requests: Iterable[RequestRecord] = (), spans: Iterable[SpanRecord] = ()
    ) -> None:
        self._requests: dict[tuple[str, str], RequestRecord] = {}  # NOTE: arrival = id order
        self._spans: dict[tuple[str, str], SpanRecord] = {}
        self.write_requests(list(requests))
        self.write_spans(list(spans))

    def write_requests(self, records: Sequence[RequestRecord]) -> int:
        """Keep the records not kept yet (by ``(trace_id, span_id)``); returns how many."""
        return _keep_new(self._requests, [_stored_request(r) for r in records])

    def write_spans(self, spans: Sequence[SpanRecord]) -> int:
        """Keep the spans not kept yet (by ``(trace_id, span_id)``); returns how many."""
        return _keep_new(self._spans, [_stored_span(s) for s in spans])

    def requests(
        self,
        start: float,
        end: float,
        *,
        tenant: str | None = None,
        model: str | None = None,
        replica: str | None = None,
        finish_reason: str | None = None,
        limit: int = 10_000,
    ) -> list[RequestRecord]:
        """Records that arrived in ``start <= arrival <= end``, oldest first (ties in the
        order written), at most ``limit``; each filter given must match exactly."""
        if limit < 1:
            raise ValueError(f"limit={limit!r}: must be a positive integer")
        wanted = {
            "tenant": tenant,
            "model": model,
            "replica": replica,
            "finish_reason": finish_reason,
        }
        chosen = [
            r
            for r in self._in_order()
            if start <= r.arrival <= end
            and all(v is None or getattr(r, k) == v for k, v in wanted.items())
        ]
        return chosen[:limit]

    def request(self, request_id: str) -> RequestRecord | None:
        """The record of ``request_id`` (the earliest, should two spans carry one id)."""
        return next((r for r in self._in_order() if r.request_id == request_id), None)

    def trace(self, trace_id: str) -> list[SpanRecord]:
        """Every kept span of ``trace_id`` (any case), by start time (ties in the order
        written)."""
        wanted = trace_id.lower()
        spans = [s for s in self._spans.values() if s.trace_id == wanted]
        return sorted(spans, key=lambda s: s.start)

    def _in_order(self) -> list[RequestRecord]:
        return sorted(self._requests.values(), key=lambda r: r.arrival)


def _keep_new(kept: dict[tuple[str, str], Any], items: list[Any]) -> int:
    new = 0
    for item in items:
        key = (item.trace_id, item.span_id)
        if key not in kept:
            kept[key] = item
            new += 1
    return new


def _stored_request(record: RequestRecord) -> RequestRecord:
    latencies = {name: _finite(getattr(record, name)) for name in _LATENCIES}
    return dataclasses.replace(
        record,
        request_id=record.request_id[:_NAME],
        trace_id=record.trace_id.lower(),
        span_id=record.span_id.lower(),
        service=_clip(record.service, _NAME),
        tenant=_clip(record.tenant, _NAME),
        model=_clip(record.model, _NAME),
        replica=_clip(record.replica, _NAME),
        finish_reason=_clip(record.finish_reason, _SHORT),
        is_error=bool(record.is_error),
        **latencies,
    )


def _stored_span(span: SpanRecord) -> SpanRecord:
    events = tuple(SpanEvent(e.name, e.time, _as_json(dict(e.attributes))) for e in span.events)
    return dataclasses.replace(
        span,
        trace_id=span.trace_id.lower(),
        span_id=span.span_id.lower(),
        parent_span_id=span.parent_span_id.lower() if span.parent_span_id else None,
        name=span.name[:_NAME],
        scope=span.scope[:_NAME],
        attributes=_as_json(dict(span.attributes)),
        events=events,
        resource=_as_json(dict(span.resource)),
    )


def _as_json(value: Mapping[str, Any]) -> Any:
    """``value`` as it reads back from JSON (NaN and infinities included, as the store's)."""
    return json.loads(json.dumps(value, sort_keys=True, default=_plain))


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _clip(text: str | None, size: int) -> str | None:
    return text[:size] if text is not None else None


def _finite(value: float | None) -> float | None:
    # NOTE: a NaN latency (an ill-formed span) would poison every aggregate: kept as None.
    return value if value is None or math.isfinite(value) else None
