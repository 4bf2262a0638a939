"""Plain records for received spans, and one request record per finished request span.

``span_records`` turns a decoded OTLP ``ExportTraceServiceRequest`` into frozen
``SpanRecord`` dataclasses (hex ids, epoch seconds, attributes as Python values).
``request_record`` reads one span as an inference request: our engine's GenAI span
(``{operation} {model}``, see docs/tracing.md) or vLLM's ``llm_request`` span (deprecated
usage names, ``gen_ai.request.id``). Anything else gives None; a missing or ill-typed
attribute gives a None field, never an exception.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from slo import tpot_seconds

VLLM_SPAN_NAME = "llm_request"
# Operations whose span is one model request (the conventions' inference operations).
INFERENCE_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})


@dataclass(frozen=True)
class SpanEvent:
    name: str
    time: float  # epoch seconds
    attributes: Mapping[str, Any]


@dataclass(frozen=True)
class SpanRecord:
    trace_id: str  # 32 lowercase hex digits
    span_id: str  # 16 lowercase hex digits
    parent_span_id: str | None  # None for a root span
    name: str
    kind: int  # OTLP SpanKind: 1 internal, 2 server, 3 client, ...
    start: float  # epoch seconds
    end: float
    attributes: Mapping[str, Any]
    events: tuple[SpanEvent, ...]
    status_code: int  # OTLP StatusCode: 0 unset, 1 ok, 2 error
    status_message: str
    resource: Mapping[str, Any]  # resource attributes, service.name included
    scope: str  # instrumentation scope name

    @property
    def service_name(self) -> str | None:
        name = self.resource.get("service.name")
        return name if isinstance(name, str) else None


@dataclass(frozen=True)
class RequestRecord:
    request_id: str
    trace_id: str
    span_id: str
    service: str | None
    tenant: str | None
    model: str | None
    replica: str | None
    arrival: float  # epoch seconds (span start)
    queue_seconds: float | None
    ttft_seconds: float | None
    prefill_seconds: float | None
    decode_seconds: float | None
    tpot_seconds: float | None
    e2e_seconds: float | None
    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    preemptions: int | None
    finish_reason: str | None
    is_error: bool


def any_value(value: AnyValue) -> Any:
    """An OTLP AnyValue as a plain Python value (bytes as lowercase hex)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return attributes_dict(value.kvlist_value.values)
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)


def attributes_dict(pairs: Iterable[KeyValue]) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in pairs}


def span_records(request: ExportTraceServiceRequest) -> list[SpanRecord]:
    records: list[SpanRecord] = []
    for resource_spans in request.resource_spans:
        resource = attributes_dict(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                records.append(
                    SpanRecord(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex() or None,
                        name=span.name,
                        kind=span.kind,
                        start=span.start_time_unix_nano / 1e9,
                        end=span.end_time_unix_nano / 1e9,
                        attributes=attributes_dict(span.attributes),
                        events=tuple(
                            SpanEvent(e.name, e.time_unix_nano / 1e9, attributes_dict(e.attributes))
                            for e in span.events
                        ),
                        status_code=span.status.code,
                        status_message=span.status.message,
                        resource=resource,
                        scope=scope_spans.scope.name,
                    )
                )
    return records


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, int) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _first(attributes: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if attributes.get(key) is not None:
            return attributes[key]
    return None


def is_request_span(span: SpanRecord) -> bool:
    """Our engine's span (an inference operation with a response id) or vLLM's."""
    a = span.attributes
    if span.name == VLLM_SPAN_NAME:
        return _text(_first(a, "gen_ai.request.id", "gen_ai.response.id")) is not None
    return (
        a.get("gen_ai.operation.name") in INFERENCE_OPERATIONS
        and _text(_first(a, "gen_ai.response.id", "gen_ai.request.id")) is not None
    )


def _finish_reason(value: Any) -> str | None:
    if isinstance(value, str) and value.startswith("["):
        try:  # some vLLM builds send the list as a JSON string
            value = json.loads(value)
        except ValueError:
            return value
    if isinstance(value, list):
        value = value[0] if value else None
    return _text(value)


def _replica(span: SpanRecord) -> str | None:
    instance = _text(span.resource.get("service.instance.id"))
    if instance is not None:
        return instance
    for attributes in (span.attributes, span.resource):
        address = _text(attributes.get("server.address"))
        if address is not None:
            port = _count(attributes.get("server.port"))
            return f"{address}:{port}" if port is not None else address
    return None


def request_record(span: SpanRecord) -> RequestRecord | None:
    """The request behind a finished request span, or None for any other span."""
    if not is_request_span(span):
        return None
    a = span.attributes
    request_id = _text(_first(a, "gen_ai.response.id", "gen_ai.request.id"))
    assert request_id is not None  # is_request_span checked it
    e2e = _number(a.get("gen_ai.latency.e2e"))
    if e2e is None and span.end >= span.start > 0:
        e2e = span.end - span.start  # the span ends at the engine's finish time
    ttft = _number(a.get("gen_ai.latency.time_to_first_token"))
    output_tokens = _count(
        _first(a, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
    )
    # NOTE: a negative token count (a malformed span) has no TPOT, rather than failing ingestion.
    tpot = None
    if output_tokens is not None and output_tokens >= 0:
        tpot = tpot_seconds(e2e, ttft, output_tokens)
    return RequestRecord(
        request_id=request_id,
        trace_id=span.trace_id,
        span_id=span.span_id,
        service=span.service_name,
        tenant=_text(a.get("tailwatch.tenant")),
        model=_text(_first(a, "gen_ai.response.model", "gen_ai.request.model")),
        replica=_replica(span),
        arrival=span.start,
        queue_seconds=_number(a.get("gen_ai.latency.time_in_queue")),
        ttft_seconds=ttft,
        prefill_seconds=_number(a.get("gen_ai.latency.time_in_model_prefill")),
        decode_seconds=_number(a.get("gen_ai.latency.time_in_model_decode")),
        tpot_seconds=tpot,
        e2e_seconds=e2e,
        input_tokens=_count(_first(a, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")),
        output_tokens=output_tokens,
        cached_tokens=_count(a.get("gen_ai.usage.cache_read.input_tokens")),
        preemptions=_count(a.get("tailwatch.request.num_preemptions")),
        finish_reason=_finish_reason(a.get("gen_ai.response.finish_reasons")),
        is_error=span.status_code == 2,
    )


def request_records(spans: Iterable[SpanRecord]) -> list[RequestRecord]:
    return [r for r in map(request_record, spans) if r is not None]
