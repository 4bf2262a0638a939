"""The bundled engine's own request spans, captured in memory during a replay, so the
replay is timed where production's records were: at the server (admission to first token,
to finish), not at a client that shares the machine.

The spans take the collector's path: OTLP protobuf (the exporter's own encoder), then
``collectors.request_records`` (``span_records`` → ``request_records``).
"""

from __future__ import annotations

from collections.abc import Sequence

from collectors.request_records import RequestRecord, request_records, span_records


class SpanCapture:
    """One ``RequestTracer`` (for ``bundled_replicas(tracers=…)``) whose spans stay in
    memory; :meth:`records` flushes them and returns their request records."""

    def __init__(self, model_name: str) -> None:
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from engine.tracing import RequestTracer, TracingConfig, build_tracer_provider

        self._exporter = InMemorySpanExporter()
        self._provider = build_tracer_provider(
            TracingConfig(sampling_ratio=1.0, service_name="tailwatch-replay"), self._exporter
        )
        self.tracer = RequestTracer(self._provider, model_name)

    def records(self) -> list[RequestRecord]:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        self._provider.force_flush()
        spans: Sequence = self._exporter.get_finished_spans()
        return request_records(span_records(encode_spans(spans))) if spans else []
