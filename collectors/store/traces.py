"""The store's spans and request records (OTLP): their writes, reads and expiry.

Writes are bulk and idempotent on ``(trace_id, span_id)``: an exporter that retries an
export whose reply it lost stores nothing twice. They use only portable SQL (look up the
batch's ids, insert the new rows in one ``executemany``), so they behave the same on SQLite
and PostgreSQL; a concurrent writer that inserts the same span between the look-up and the
insert makes the unique constraint refuse ours, and one retry then skips it. Reads return the
frozen dataclasses of :mod:`collectors.request_records`, never SQLAlchemy objects.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import delete, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from collectors.request_records import RequestRecord, SpanEvent, SpanRecord
from collectors.store.models import RequestRow, SpanRow
from collectors.store.sql import chunks

#: ``String(n)`` limits of the models; longer text is cut so PostgreSQL never refuses a span
#: for a long name (SQLite does not enforce them).
_NAME, _SHORT = 255, 64

_Row = TypeVar("_Row", SpanRow, RequestRow)


class Traces:
    """Spans and request records, written one writer at a time (``write_lock``, shared with
    the store's other writers)."""

    def __init__(self, sessions: sessionmaker[Session], write_lock: threading.Lock) -> None:
        self._sessions = sessions
        self._write_lock = write_lock

    # -- writing ---------------------------------------------------------------------------

    def write_spans(self, spans: Sequence[SpanRecord]) -> int:
        """Store ``spans`` in one transaction; returns how many were new. A span whose
        ``(trace_id, span_id)`` is already stored (or repeated in ``spans``) is skipped."""
        return self._write_new(SpanRow, [_span_row(s) for s in spans])

    def write_requests(self, records: Sequence[RequestRecord]) -> int:
        """Store request records in one transaction; returns how many were new. Identity is
        the request span's ``(trace_id, span_id)``, as for spans."""
        return self._write_new(RequestRow, [_request_row(r) for r in records])

    def _write_new(self, table: type[_Row], rows: list[dict[str, Any]]) -> int:
        if not rows:
            return 0
        # NOTE: one writer at a time per Store (scrapes, spans, maintenance): SQLite takes one
        # writer per file, and a second would wait out its busy timeout and fail.
        with self._write_lock:
            return self._write_new_locked(table, rows)

    def _write_new_locked(self, table: type[_Row], rows: list[dict[str, Any]]) -> int:
        for attempt in range(2):
            with self._sessions() as session:
                try:
                    new = _new_rows(session, table, rows)
                    if new:
                        session.execute(insert(table), new)
                    session.commit()
                    return len(new)
                except IntegrityError:
                    # NOTE: another writer stored some of these between our look-up and our
                    # insert; the retry's look-up sees them.
                    session.rollback()
                    if attempt == 1:
                        raise
        raise AssertionError("unreachable")

    # -- reading ---------------------------------------------------------------------------

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
        """Request records that arrived in ``start <= arrival <= end``, oldest first, at most
        ``limit``; each filter given must match exactly."""
        if limit < 1:
            raise ValueError(f"limit={limit!r}: must be a positive integer")
        query = select(RequestRow).where(
            RequestRow.arrival_seconds >= start, RequestRow.arrival_seconds <= end
        )
        for column, value in (
            (RequestRow.tenant, tenant),
            (RequestRow.model, model),
            (RequestRow.replica, replica),
            (RequestRow.finish_reason, finish_reason),
        ):
            if value is not None:
                query = query.where(column == value)
        query = query.order_by(RequestRow.arrival_seconds, RequestRow.id).limit(limit)
        with self._sessions() as session:
            return [_request_record(row) for row in session.scalars(query)]

    def request(self, request_id: str) -> RequestRecord | None:
        """The record of ``request_id`` (the earliest, should two spans carry one id)."""
        query = (
            select(RequestRow)
            .where(RequestRow.request_id == request_id)
            .order_by(RequestRow.arrival_seconds, RequestRow.id)
            .limit(1)
        )
        with self._sessions() as session:
            row = session.scalar(query)
            return _request_record(row) if row is not None else None

    def trace(self, trace_id: str) -> list[SpanRecord]:
        """Every stored span of ``trace_id`` (32 hex digits, any case), by start time."""
        query = (
            select(SpanRow)
            .where(SpanRow.trace_id == trace_id.lower())
            .order_by(SpanRow.start_seconds, SpanRow.id)
        )
        with self._sessions() as session:
            return [_span_record(row) for row in session.scalars(query)]


def _new_rows(session: Session, table: type[_Row], rows: list[dict[str, Any]]) -> list[dict]:
    """``rows`` whose (trace_id, span_id) is neither stored nor earlier in ``rows``."""
    seen: set[tuple[str, str]] = set()
    for chunk in chunks(sorted({row["trace_id"] for row in rows})):
        found = session.execute(
            select(table.trace_id, table.span_id).where(table.trace_id.in_(chunk))
        )
        seen.update((trace_id, span_id) for trace_id, span_id in found)
    new = []
    for row in rows:
        key = (row["trace_id"], row["span_id"])
        if key not in seen:
            seen.add(key)
            new.append(row)
    return new


@dataclass(frozen=True)
class TraceExpiry:
    """What one :func:`expire_traces` call deleted; ``more_to_do``: a batch limit stopped it."""

    spans_deleted: int
    request_records_deleted: int
    more_to_do: bool


def expire_traces(
    session: Session, *, span_cutoff_seconds: float, request_cutoff_seconds: float, limit: int
) -> TraceExpiry:
    """Delete spans that started before ``span_cutoff_seconds`` and request records that
    arrived before ``request_cutoff_seconds``, oldest first, at most ``limit`` of each."""
    deleted: list[int] = []
    more_to_do = False
    for table, column, cutoff in (
        (SpanRow, SpanRow.start_seconds, span_cutoff_seconds),
        (RequestRow, RequestRow.arrival_seconds, request_cutoff_seconds),
    ):
        ids = list(
            session.scalars(
                select(table.id).where(column < cutoff).order_by(column).limit(limit + 1)
            )
        )
        more_to_do = more_to_do or len(ids) > limit
        ids = ids[:limit]
        for chunk in chunks(ids):
            session.execute(delete(table).where(table.id.in_(chunk)))
        deleted.append(len(ids))
    return TraceExpiry(deleted[0], deleted[1], more_to_do)


def _clip(text: str | None, size: int) -> str | None:
    return text[:size] if text is not None else None


def _dumps(value: Any) -> str:
    # NOTE: NaN and infinities are valid OTLP doubles; Python's JSON writes and reads them.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_plain)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _span_row(span: SpanRecord) -> dict[str, Any]:
    events = [
        {"name": e.name, "time": e.time, "attributes": dict(e.attributes)} for e in span.events
    ]
    return {
        "trace_id": span.trace_id.lower(),
        "span_id": span.span_id.lower(),
        "parent_span_id": span.parent_span_id.lower() if span.parent_span_id else None,
        "name": _clip(span.name, _NAME),
        "kind": span.kind,
        "start_seconds": span.start,
        "end_seconds": span.end,
        "status_code": span.status_code,
        "status_message": span.status_message,
        "service": _clip(span.service_name, _NAME),
        "scope": _clip(span.scope, _NAME),
        "attributes_json": _dumps(dict(span.attributes)),
        "events_json": _dumps(events),
        "resource_json": _dumps(dict(span.resource)),
    }


def _span_record(row: SpanRow) -> SpanRecord:
    return SpanRecord(
        trace_id=row.trace_id,
        span_id=row.span_id,
        parent_span_id=row.parent_span_id,
        name=row.name,
        kind=row.kind,
        start=row.start_seconds,
        end=row.end_seconds,
        attributes=json.loads(row.attributes_json),
        events=tuple(
            SpanEvent(e["name"], e["time"], e["attributes"]) for e in json.loads(row.events_json)
        ),
        status_code=row.status_code,
        status_message=row.status_message,
        resource=json.loads(row.resource_json),
        scope=row.scope,
    )


def _finite(value: float | None) -> float | None:
    # NOTE: a NaN latency (an ill-formed span) would poison every aggregate; store None.
    return value if value is None or math.isfinite(value) else None


def _request_row(record: RequestRecord) -> dict[str, Any]:
    return {
        "request_id": _clip(record.request_id, _NAME),
        "trace_id": record.trace_id.lower(),
        "span_id": record.span_id.lower(),
        "service": _clip(record.service, _NAME),
        "tenant": _clip(record.tenant, _NAME),
        "model": _clip(record.model, _NAME),
        "replica": _clip(record.replica, _NAME),
        "arrival_seconds": record.arrival,
        "queue_seconds": _finite(record.queue_seconds),
        "ttft_seconds": _finite(record.ttft_seconds),
        "prefill_seconds": _finite(record.prefill_seconds),
        "decode_seconds": _finite(record.decode_seconds),
        "tpot_seconds": _finite(record.tpot_seconds),
        "e2e_seconds": _finite(record.e2e_seconds),
        "input_tokens": record.input_tokens,
        "output_tokens": record.output_tokens,
        "cached_tokens": record.cached_tokens,
        "preemptions": record.preemptions,
        "finish_reason": _clip(record.finish_reason, _SHORT),
        "is_error": record.is_error,
    }


def _request_record(row: RequestRow) -> RequestRecord:
    return RequestRecord(
        request_id=row.request_id,
        trace_id=row.trace_id,
        span_id=row.span_id,
        service=row.service,
        tenant=row.tenant,
        model=row.model,
        replica=row.replica,
        arrival=row.arrival_seconds,
        queue_seconds=row.queue_seconds,
        ttft_seconds=row.ttft_seconds,
        prefill_seconds=row.prefill_seconds,
        decode_seconds=row.decode_seconds,
        tpot_seconds=row.tpot_seconds,
        e2e_seconds=row.e2e_seconds,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        cached_tokens=row.cached_tokens,
        preemptions=row.preemptions,
        finish_reason=row.finish_reason,
        is_error=bool(row.is_error),
    )
