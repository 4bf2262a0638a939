"""One OpenTelemetry span per request, in the GenAI conventions, exported over OTLP/HTTP.

The span (``{operation} {model}``, kind SERVER) starts when the front end admits the
request and ends at the engine's finish time. It carries the GenAI request, response
and usage attributes, vLLM's ``gen_ai.latency.*`` phase breakdown (so spans from this
engine and from vLLM read the same way), and events at the real times of scheduling,
each prefill chunk, the first token and each preemption (and, for a structured request,
its grammar compile: how long, and whether the grammar was cached). A W3C ``traceparent`` from
the client joins its trace. Tracing off means no provider: every hook returns at once.
Delivery is counted and the shutdown's flush is bounded (``engine.span_export``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from engine.errors import ConfigError
from engine.safe_text import safe_text
from engine.span_export import DEFAULT_FLUSH_TIMEOUT_SECONDS, CountingTracerProvider, SpanDelivery

if TYPE_CHECKING:
    from engine.async_engine import RequestHandle
    from engine.llm_engine import KnobChange, LLMEngine
    from engine.outputs import RequestOutput, RequestTimings
    from engine.sampling_params import SamplingParams

logger = logging.getLogger(__name__)

PROVIDER_NAME = "tailwatch"
TRACER_NAME = "tailwatch.engine"
_PROPAGATOR = TraceContextTextMapPropagator()
_TRACE_HEADERS = ("traceparent", "tracestate")

# Events on the request span (names and attributes of our own, not in the conventions).
EVENT_SCHEDULED = "tailwatch.request.scheduled"
EVENT_PREFILL_CHUNK = "tailwatch.request.prefill_chunk"
EVENT_FIRST_TOKEN = "tailwatch.request.first_token"
EVENT_PREEMPTED = "tailwatch.request.preempted"
EVENT_GRAMMAR_COMPILE = "tailwatch.request.grammar_compile"


@dataclass(frozen=True)
class TracingConfig:
    """Where spans go and how many: ``otlp_endpoint`` None turns tracing off.

    ``otlp_endpoint`` is the full OTLP/HTTP URL, ``/v1/traces`` included (e.g.
    ``http://127.0.0.1:4318/v1/traces``). ``sampling_ratio`` applies to requests that
    arrive without a sampled parent; a client's sampling decision is always followed.
    ``service_instance_id`` is the resource's ``service.instance.id``: the server sets the id
    its ``tailwatch:engine_info`` series carries, so spans join the scrapes of the engine.
    """

    otlp_endpoint: str | None = None
    sampling_ratio: float = 1.0
    service_name: str = "tailwatch-engine"
    service_instance_id: str | None = None

    def __post_init__(self) -> None:
        ratio = self.sampling_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
            raise ConfigError(
                f"sampling_ratio={ratio!r}: must be a number from 0 (none) to 1 (every request)"
            )
        if self.otlp_endpoint is not None and not self.otlp_endpoint.startswith(
            ("http://", "https://")
        ):
            raise ConfigError(
                f"otlp_endpoint={self.otlp_endpoint!r}: must be an http(s) URL ending in "
                "/v1/traces, e.g. http://127.0.0.1:4318/v1/traces"
            )


def build_tracer_provider(config: TracingConfig, exporter: SpanExporter) -> TracerProvider:
    """A provider sampling ``ParentBased(TraceIdRatioBased(ratio))`` that batches spans to
    ``exporter`` and counts their delivery (``engine.span_export``). Not installed
    globally: the engine passes it where it is needed."""
    return CountingTracerProvider(
        config.service_name, config.sampling_ratio, exporter, config.service_instance_id
    )


class RequestTracer:
    """Request spans for one served model; an ``EngineObserver``.

    ``destination`` (e.g. the OTLP endpoint) only names where spans go in the shutdown's
    log line."""

    def __init__(
        self,
        tracer_provider: TracerProvider | None,
        model_name: str,
        destination: str = "the exporter",
    ) -> None:
        self._provider = tracer_provider
        self._tracer = tracer_provider.get_tracer(TRACER_NAME) if tracer_provider else None
        self.model_name = model_name
        self.destination = destination

    @classmethod
    def from_config(cls, config: TracingConfig, model_name: str) -> RequestTracer:
        if config.otlp_endpoint is None:
            return cls(None, model_name)
        # Imported here so that tracing off never loads the exporter (requests, protobuf).
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=config.otlp_endpoint)
        return cls(build_tracer_provider(config, exporter), model_name, config.otlp_endpoint)

    @property
    def enabled(self) -> bool:
        return self._tracer is not None

    def start_request(
        self,
        handle: RequestHandle,
        headers: Mapping[str, str],
        operation: str,
        request_attributes: Mapping[str, Any],
    ) -> None:
        """Open the request's span now, as a child of the client's ``traceparent`` if any.

        ``operation`` is ``gen_ai.operation.name`` (``chat``, ``text_completion``).
        ``request_attributes`` are extra span attributes with their OTel names (e.g.
        ``gen_ai.request.stream``, ``server.address``); None values are dropped, and they
        win over the attributes derived here. Sets ``handle.span`` and ``handle.trace_id``
        (32 lowercase hex digits) only when the span is sampled.
        """
        if self._tracer is None:
            return
        carrier = {k.lower(): v for k, v in headers.items() if k.lower() in _TRACE_HEADERS}
        parent = _PROPAGATOR.extract(carrier) if carrier else None
        attributes: dict[str, Any] = {
            **start_attributes(
                self.model_name,
                operation,
                handle.params,
                handle.request_id,
                handle.tenant,
                handle.priority,
            ),
            **request_attributes,
        }
        span = self._tracer.start_span(
            f"{operation} {self.model_name}",
            context=parent,
            kind=SpanKind.SERVER,
            attributes={k: _safe_attribute(v) for k, v in attributes.items() if v is not None},
            start_time=time.time_ns(),
        )
        if not span.is_recording():
            return
        handle.span = span
        handle.trace_id = format(span.get_span_context().trace_id, "032x")

    def fail_request(self, handle: RequestHandle, error_type: str, message: str = "") -> None:
        """End a traced request that will never reach the engine's finish (e.g. the
        engine refused it after admission): status ERROR with ``error.type``."""
        span: Span | None = handle.span
        if span is None:
            return
        handle.span = None
        span.set_attribute("error.type", error_type)
        span.set_status(Status(StatusCode.ERROR, message or error_type))
        span.end()

    # -- EngineObserver ----------------------------------------------------------------------

    def on_step(
        self,
        engine: LLMEngine,
        outputs: Sequence[RequestOutput],
        handles: Mapping[str, RequestHandle],
    ) -> None:
        """End the spans of requests that finished (or were aborted) in this step."""
        if self._tracer is None:
            return
        for out in outputs:
            if not out.finished or out.timings is None:
                continue
            handle = handles.get(out.request_id)
            if handle is None or handle.span is None:
                continue
            span, handle.span = handle.span, None
            self._finish(span, out, out.timings)

    def on_knob_changes(self, changes: Sequence[KnobChange]) -> None:
        return

    def on_rejected(self, reason: str, tenant: str | None) -> None:
        return

    def delivery(self) -> SpanDelivery | None:
        """How many spans ended and were delivered so far; None when tracing is off or
        the provider does not count (not made by ``build_tracer_provider``)."""
        if isinstance(self._provider, CountingTracerProvider):
            return self._provider.delivery()
        return None

    def flush(self, timeout_seconds: float = DEFAULT_FLUSH_TIMEOUT_SECONDS) -> bool:
        """Export the spans queued so far now, not at the batch's next schedule (within
        ``timeout_seconds``); False when some were not exported. Tracing off: True."""
        if self._provider is None:
            return True
        return bool(self._provider.force_flush(int(timeout_seconds * 1000)))

    def shutdown(self, timeout_seconds: float = DEFAULT_FLUSH_TIMEOUT_SECONDS) -> None:
        """Flush the queued spans (within ``timeout_seconds``) and stop the exporter, then
        log what was delivered: an error naming the count when any span was not (spans
        still open are not exported)."""
        if self._provider is None:
            return
        if not isinstance(self._provider, CountingTracerProvider):
            self._provider.shutdown()
            return
        self._provider.shutdown(timeout_seconds)
        delivery = self._provider.delivery()
        if delivery.num_undelivered:
            logger.error(
                "traces: %d of %d request spans were not delivered to %s (%d in failed "
                "exports, the rest dropped or still queued after the %g s flush)",
                delivery.num_undelivered, delivery.num_ended, self.destination,
                delivery.num_failed, timeout_seconds,
            )  # fmt: skip
        else:
            logger.info(
                "traces: all %d request spans delivered to %s",
                delivery.num_ended,
                self.destination,
            )

    # -- internals ---------------------------------------------------------------------------

    def _finish(self, span: Span, out: RequestOutput, t: RequestTimings) -> None:
        start_ns = getattr(span, "start_time", None) or 0
        ended = finished_span(self.model_name, out, t)
        span.set_attributes(ended.attributes)
        for name, attributes, at_seconds in ended.events:
            # NOTE: never before the span's start (a front end's own clock started it)
            span.add_event(name, attributes or None, timestamp=max(start_ns, int(at_seconds * 1e9)))
        if ended.error_type is not None:
            span.set_attribute("error.type", ended.error_type)
            span.set_status(Status(StatusCode.ERROR, ended.status_message))
        span.end(end_time=max(start_ns, int(ended.end_seconds * 1e9)))


def start_attributes(
    model_name: str,
    operation: str,
    params: SamplingParams,
    request_id: str,
    tenant: str | None,
    priority: int,
) -> dict[str, Any]:
    """The attributes a request's span opens with (GenAI request attributes; ``None``
    values left out)."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": PROVIDER_NAME,
        "gen_ai.request.model": model_name,
        "gen_ai.request.max_tokens": params.max_tokens,
        "gen_ai.request.temperature": float(params.temperature),
        "gen_ai.request.top_p": float(params.top_p),
        "gen_ai.request.seed": params.seed,
        "gen_ai.request.stop_sequences": list(params.stop) or None,
        "gen_ai.request.id": request_id,
        "gen_ai.response.id": request_id,
        "tailwatch.tenant": tenant,
        "tailwatch.request.priority": priority,
    }
    return {k: v for k, v in attributes.items() if v is not None}


@dataclass(frozen=True)
class FinishedSpan:
    """What a finished request adds to its span: response, usage and latency attributes,
    the events (name, attributes, epoch seconds), the error type and status message when
    it did not finish normally (aborted, or failed by the engine), and its end (epoch s)."""

    attributes: dict[str, Any]
    events: tuple[tuple[str, dict[str, Any], float], ...]
    error_type: str | None
    status_message: str
    end_seconds: float


def finished_span(model_name: str, out: RequestOutput, t: RequestTimings) -> FinishedSpan:
    """The span fields of a finished request (``RequestTracer`` ends its spans with them;
    the virtual fleet builds its spans from them). Engine times are monotonic;
    ``arrival_wall_time`` anchors them to the epoch."""

    def wall(at: float) -> float:
        return t.arrival_wall_time + (at - t.arrival_time)

    attributes: dict[str, Any] = {
        "gen_ai.response.model": model_name,
        "gen_ai.response.finish_reasons": [out.finish_reason or "error"],
        "gen_ai.usage.input_tokens": out.num_prompt_tokens,
        "gen_ai.usage.output_tokens": out.num_output_tokens,
        "gen_ai.usage.cache_read.input_tokens": out.num_cached_tokens,
        "tailwatch.request.num_preemptions": out.num_preemptions,
    }
    attributes.update(_latency_attributes(t))
    events: list[tuple[str, dict[str, Any], float]] = []
    if t.grammar_compile is not None:
        compiled = t.grammar_compile
        grammar = {
            "tailwatch.grammar.kind": compiled.kind,
            "tailwatch.grammar.cache_hit": compiled.cache_hit,
            "tailwatch.grammar.compile_seconds": compiled.compile_seconds,
        }
        events.append((EVENT_GRAMMAR_COMPILE, grammar, wall(compiled.time)))
    if t.first_scheduled_time is not None:
        events.append((EVENT_SCHEDULED, {}, wall(t.first_scheduled_time)))
    for index, (at, first_position, num_tokens) in enumerate(t.prefill_chunks):
        chunk = {
            "tailwatch.prefill.chunk_index": index,
            "tailwatch.prefill.first_position": first_position,
            "tailwatch.prefill.num_tokens": num_tokens,
        }
        events.append((EVENT_PREFILL_CHUNK, chunk, wall(at)))
    if t.first_token_time is not None:
        events.append((EVENT_FIRST_TOKEN, {}, wall(t.first_token_time)))
    for index, at in enumerate(t.preempted_times):
        events.append((EVENT_PREEMPTED, {"tailwatch.preemption.index": index}, wall(at)))
    error_type, message = None, ""
    if out.finish_reason == "abort":
        error_type, message = "abort", "request aborted before it finished"
    elif out.finish_reason is None:  # a failed step took the request down
        error_type, message = "engine_error", "the engine failed while running it"
    finished = t.finished_time if t.finished_time is not None else t.arrival_time
    return FinishedSpan(attributes, tuple(events), error_type, message, wall(finished))


def _safe_attribute(value: Any) -> Any:
    """Strings made encodable: one bad string would fail the export of its whole batch."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, list):
        return [safe_text(v) if isinstance(v, str) else v for v in value]
    return value


def _latency_attributes(t: RequestTimings) -> dict[str, float]:
    """vLLM's ``gen_ai.latency.*`` breakdown in seconds, where the request got that far."""
    latency: dict[str, float] = {}
    if t.finished_time is not None:
        latency["gen_ai.latency.e2e"] = t.finished_time - t.arrival_time
    scheduled, first = t.first_scheduled_time, t.first_token_time
    if scheduled is not None:
        latency["gen_ai.latency.time_in_queue"] = scheduled - t.arrival_time
    if first is not None:
        latency["gen_ai.latency.time_to_first_token"] = first - t.arrival_time
        latency["gen_ai.latency.time_in_model_decode"] = t.token_times[-1] - first
    if scheduled is not None and first is not None:
        latency["gen_ai.latency.time_in_model_prefill"] = first - scheduled
        latency["gen_ai.latency.time_in_model_inference"] = t.token_times[-1] - scheduled
    return latency
