"""Where the engine's spans go: a batching provider that counts what it delivers.

A span is lost without a trace of its own when the batch processor's queue is full, when
an export fails after the exporter's retries (the OTLP/HTTP exporter retries 429, 502,
503 and 504, honouring ``Retry-After``, and connection errors, within its timeout), or
when the process exits before the queue is flushed. :class:`CountingTracerProvider`
counts the spans that ended and the spans each export delivered or failed, so a
shutdown can say how many never arrived, and flushes within a bounded time.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

#: Seconds a shutdown waits for queued spans to be exported (the OTLP exporter's own
#: per-export timeout is 10 s, retries included); what is still queued then is lost.
DEFAULT_FLUSH_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class SpanDelivery:
    """Spans ended, and how the exports of them went, since the provider was made."""

    num_ended: int
    num_exported: int  # in exports the receiver accepted
    num_failed: int  # in exports that failed after the exporter's retries

    @property
    def num_undelivered(self) -> int:
        """Spans that ended but were not accepted: failed, dropped by a full queue, or
        still queued."""
        return self.num_ended - self.num_exported


class _Counts:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ended = self.exported = self.failed = 0

    def add(self, *, ended: int = 0, exported: int = 0, failed: int = 0) -> None:
        with self._lock:
            self.ended += ended
            self.exported += exported
            self.failed += failed

    def snapshot(self) -> SpanDelivery:
        with self._lock:
            return SpanDelivery(self.ended, self.exported, self.failed)


class _CountingExporter(SpanExporter):
    """Delegates to ``exporter`` and counts the spans of each export by its result."""

    def __init__(self, exporter: SpanExporter, counts: _Counts) -> None:
        self._exporter = exporter
        self._counts = counts
        self._is_shut_down = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self._exporter.export(spans)
        except Exception:
            self._counts.add(failed=len(spans))
            raise
        if result is SpanExportResult.SUCCESS:
            self._counts.add(exported=len(spans))
        else:
            self._counts.add(failed=len(spans))
        return result

    def shutdown(self) -> None:
        # NOTE: called early by a flush past its bound, and again by the batch processor.
        if not self._is_shut_down:
            self._is_shut_down = True
            self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._exporter.force_flush(timeout_millis)


class _CountingBatchProcessor(BatchSpanProcessor):
    def __init__(self, exporter: _CountingExporter, counts: _Counts) -> None:
        super().__init__(exporter)
        self._counts = counts

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None and span.context.trace_flags.sampled:
            self._counts.add(ended=1)
        super().on_end(span)


class CountingTracerProvider(TracerProvider):
    """A provider sampling ``ParentBased(TraceIdRatioBased(ratio))`` that batches spans to
    one exporter and counts their delivery (:meth:`delivery`). ``instance_id``, when given,
    is the resource's ``service.instance.id`` (OTel semantic conventions)."""

    def __init__(
        self,
        service_name: str,
        sampling_ratio: float,
        exporter: SpanExporter,
        instance_id: str | None = None,
    ) -> None:
        attributes = {"service.name": service_name}
        if instance_id is not None:
            attributes["service.instance.id"] = instance_id
        super().__init__(
            resource=Resource.create(attributes),
            sampler=ParentBased(TraceIdRatioBased(sampling_ratio)),
        )
        self._counts = _Counts()
        self._exporter = _CountingExporter(exporter, self._counts)
        self._batches = _CountingBatchProcessor(self._exporter, self._counts)
        self.add_span_processor(self._batches)

    def delivery(self) -> SpanDelivery:
        return self._counts.snapshot()

    def shutdown(self, timeout_seconds: float = DEFAULT_FLUSH_TIMEOUT_SECONDS) -> None:
        """Export what is queued, for about ``timeout_seconds``, then stop. Past the bound
        the exporter is shut down: its retries still waiting give up and what is left
        fails at once (``delivery()`` counts it). An HTTP request already sent may still
        run to its own timeout (the exporter's, 10 s by default)."""
        # NOTE: the SDK's force_flush takes no timeout (opentelemetry-python #4568) and the
        # batch processor's shutdown waits up to 30 s, so the flush runs in a thread of
        # its own and the bound is kept here.
        flusher = threading.Thread(target=self._batches.force_flush, name="span-flush", daemon=True)
        flusher.start()
        flusher.join(max(0.0, timeout_seconds))
        if flusher.is_alive():
            self._exporter.shutdown()
        super().shutdown()
