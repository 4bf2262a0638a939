"""Request spans in the GenAI conventions, driven by a real engine on the tiny preset and
captured with the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import logging
import math
import socket
import threading

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om

from engine.async_engine import AsyncEngine
from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.llm_engine import LLMEngine
from engine.metrics import EngineMetrics
from engine.sampling_params import SamplingParams
from engine.span_export import SpanDelivery
from engine.tracing import (
    EVENT_FIRST_TOKEN,
    EVENT_PREEMPTED,
    EVENT_PREFILL_CHUNK,
    RequestTracer,
    TracingConfig,
    build_tracer_provider,
)

MODEL = "tiny-test"
PARENT_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN_ID = "00f067aa0ba902b7"


def _serve(requests, ratio=1.0, tracing=True, **config):
    """Serve ``(prompt, params, headers, operation, tenant)`` concurrently; returns the
    final outputs, the handles, the finished spans and the metrics exposition."""
    exporter = InMemorySpanExporter()
    provider = build_tracer_provider(TracingConfig(sampling_ratio=ratio), exporter)
    tracer = RequestTracer(provider if tracing else None, MODEL)
    config = {"max_model_len": 256, "num_gpu_blocks": 64, **config}
    front = AsyncEngine(LLMEngine(EngineConfig(**config)))
    metrics = EngineMetrics(MODEL, front.knobs(), max_model_len=config["max_model_len"])
    front.observers += [metrics, tracer]
    handles = []

    async def one(prompt, params, headers, operation, tenant):
        def admitted(handle):
            handles.append(handle)
            tracer.start_request(handle, headers, operation, {"gen_ai.request.stream": True})

        stream = front.generate(prompt, params, tenant=tenant, on_admitted=admitted)
        return [out async for out in stream][-1]

    async def scenario():
        front.start()
        try:
            return await asyncio.gather(*(one(*r) for r in requests))
        finally:
            front.shutdown()

    finals = asyncio.run(scenario())
    tracer.shutdown()  # flushes the batch processor
    exposition = metrics.render("application/openmetrics-text")[0].decode()
    return finals, handles, exporter.get_finished_spans(), exposition


def test_span_carries_the_genai_attributes_and_the_latency_breakdown():
    params = SamplingParams(max_tokens=6, temperature=0.5, top_p=0.9, seed=7, stop=("zzzz",))
    (final,), (handle,), (span,), exposition = _serve([("hello", params, {}, "chat", "acme")])
    t, a = final.timings, span.attributes
    assert span.name == f"chat {MODEL}" and span.kind is SpanKind.SERVER
    assert span.status.status_code is StatusCode.UNSET
    assert handle.trace_id == format(span.context.trace_id, "032x")
    assert span.parent is None  # no traceparent: a new root
    assert {k: a[k] for k in a if not k.startswith("gen_ai.latency.")} == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "tailwatch",
        "gen_ai.request.model": MODEL,
        "gen_ai.request.max_tokens": 6,
        "gen_ai.request.temperature": 0.5,
        "gen_ai.request.top_p": 0.9,
        "gen_ai.request.seed": 7,
        "gen_ai.request.stop_sequences": ("zzzz",),
        "gen_ai.request.stream": True,
        "gen_ai.request.id": handle.request_id,
        "gen_ai.response.id": handle.request_id,
        "gen_ai.response.model": MODEL,
        "gen_ai.response.finish_reasons": (final.finish_reason,),
        "gen_ai.usage.input_tokens": final.num_prompt_tokens,
        "gen_ai.usage.output_tokens": final.num_output_tokens,
        "gen_ai.usage.cache_read.input_tokens": final.num_cached_tokens,
        "tailwatch.tenant": "acme",
        "tailwatch.request.priority": 0,
        "tailwatch.request.num_preemptions": 0,
    }
    expected = {
        "e2e": t.e2e_seconds,
        "time_in_queue": t.queue_seconds,
        "time_to_first_token": t.ttft_seconds,
        "time_in_model_prefill": t.first_token_time - t.first_scheduled_time,
        "time_in_model_decode": t.token_times[-1] - t.first_token_time,
        "time_in_model_inference": t.token_times[-1] - t.first_scheduled_time,
    }
    for name, seconds in expected.items():
        assert math.isclose(a[f"gen_ai.latency.{name}"], seconds), name
    end_ns = (t.arrival_wall_time + t.e2e_seconds) * 1e9
    assert abs(span.end_time - end_ns) < 1e6 and span.end_time >= span.start_time
    events = [e.name for e in span.events]
    assert events.count(EVENT_PREFILL_CHUNK) == len(t.prefill_chunks) >= 1
    assert EVENT_FIRST_TOKEN in events and EVENT_PREEMPTED not in events
    assert [e.timestamp for e in span.events] == sorted(e.timestamp for e in span.events)
    # The metrics' exemplars point at this trace.
    ttft = next(f for f in parse_om(exposition) if f.name == "vllm:time_to_first_token_seconds")
    assert {s.exemplar.labels["trace_id"] for s in ttft.samples if s.exemplar} == {handle.trace_id}


def test_traceparent_joins_the_callers_trace_and_its_sampling_decision():
    params = SamplingParams(max_tokens=3, ignore_eos=True)
    sampled = {"Traceparent": f"00-{PARENT_TRACE_ID}-{PARENT_SPAN_ID}-01"}
    unsampled = {"traceparent": f"00-{'1' * 32}-{PARENT_SPAN_ID}-00"}
    requests = [("joined", params, sampled, "text_completion", None)]
    requests.append(("dropped", params, unsampled, "text_completion", None))
    _, handles, (span,), _ = _serve(requests, ratio=0.0)
    assert span.name == f"text_completion {MODEL}"
    assert format(span.context.trace_id, "032x") == PARENT_TRACE_ID
    assert format(span.parent.span_id, "016x") == PARENT_SPAN_ID
    joined, dropped = sorted(handles, key=lambda h: h.trace_id is None)
    assert joined.trace_id == PARENT_TRACE_ID
    assert dropped.trace_id is None and dropped.span is None


def test_preemptions_and_prefill_chunks_are_events_at_their_times():
    params = SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True)
    requests = [(f"request number {i} " * 4, params, {}, "chat", None) for i in range(6)]
    finals, _, spans, _ = _serve(requests, max_model_len=128, num_gpu_blocks=12)
    by_id = {span.attributes["gen_ai.response.id"]: span for span in spans}
    preempted = [out for out in finals if out.num_preemptions]
    assert preempted, "the tight KV pool should have forced a preemption"
    for out in finals:
        span = by_id[out.request_id]
        events = [e for e in span.events if e.name == EVENT_PREEMPTED]
        assert span.attributes["tailwatch.request.num_preemptions"] == out.num_preemptions
        assert len(events) == out.num_preemptions
        chunks = [e for e in span.events if e.name == EVENT_PREFILL_CHUNK]
        assert len(chunks) == len(out.timings.prefill_chunks) > out.num_preemptions
        for event, (_, first_position, num_tokens) in zip(
            chunks, out.timings.prefill_chunks, strict=True
        ):
            assert event.attributes["tailwatch.prefill.num_tokens"] == num_tokens
            assert event.attributes["tailwatch.prefill.first_position"] == first_position
        for event in span.events:
            assert span.start_time <= event.timestamp <= span.end_time


def test_aborted_request_ends_its_span_with_an_error_status():
    exporter = InMemorySpanExporter()
    tracer = RequestTracer(build_tracer_provider(TracingConfig(), exporter), MODEL)
    front = AsyncEngine(LLMEngine(EngineConfig(max_model_len=256, num_gpu_blocks=64)))
    front.observers.append(tracer)

    async def scenario():
        front.start()
        try:
            stream = front.generate(
                "cancel me",
                SamplingParams(max_tokens=200, ignore_eos=True),
                on_admitted=lambda h: tracer.start_request(h, {}, "chat", {}),
            )
            async for out in stream:
                if out.num_output_tokens >= 3:
                    break
            await stream.aclose()  # the client went away
            while front.num_in_flight:
                await asyncio.sleep(0.01)
        finally:
            front.shutdown()

    asyncio.run(scenario())
    tracer.shutdown()
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "abort"
    assert span.attributes["gen_ai.response.finish_reasons"] == ("abort",)
    assert span.attributes["gen_ai.usage.output_tokens"] >= 3


def test_sampling_ratio_zero_records_nothing_and_tracing_off_sets_no_span():
    params = SamplingParams(max_tokens=3, ignore_eos=True)
    for kwargs in ({"ratio": 0.0}, {"tracing": False}):
        finals, (handle,), spans, _ = _serve([("quiet", params, {}, "chat", None)], **kwargs)
        assert finals[0].finished and spans == ()
        assert handle.span is None and handle.trace_id is None
    off = RequestTracer.from_config(TracingConfig(), MODEL)
    assert not off.enabled
    on = RequestTracer.from_config(
        TracingConfig(otlp_endpoint="http://127.0.0.1:9/v1/traces", sampling_ratio=0.25), MODEL
    )
    assert on.enabled
    assert "TraceIdRatioBased{0.25}" in on._provider.sampler.get_description()
    on.shutdown()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sampling_ratio": 1.5}, "sampling_ratio=1.5"),
        ({"sampling_ratio": -0.1}, "sampling_ratio=-0.1"),
        ({"sampling_ratio": True}, "sampling_ratio=True"),
        ({"otlp_endpoint": "127.0.0.1:4318"}, "must be an http"),
    ],
)
def test_tracing_config_is_validated(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        TracingConfig(**kwargs)


# -- delivery: every ended span is accounted for at shutdown ---------------------------------


class _FailingExporter(InMemorySpanExporter):
    """Refuses every export, as an exporter whose retries ran out does."""

    def export(self, spans):
        return SpanExportResult.FAILURE


def _end_spans(tracer: RequestTracer, count: int) -> None:
    otel = tracer._provider.get_tracer("test")
    for i in range(count):
        otel.start_span(f"span {i}").end()


def test_shutdown_counts_every_span_delivered():
    params = SamplingParams(max_tokens=3, ignore_eos=True)
    requests = [(f"p{i}", params, {}, "chat", "acme") for i in range(5)]
    exporter = InMemorySpanExporter()
    tracer = RequestTracer(build_tracer_provider(TracingConfig(), exporter), MODEL)
    _end_spans(tracer, 7)
    tracer.shutdown()
    assert tracer.delivery() == SpanDelivery(num_ended=7, num_exported=7, num_failed=0)
    assert len(exporter.get_finished_spans()) == 7
    # and through the engine: one span per finished request, each delivered
    finals, _, spans, _ = _serve(requests)
    assert len(spans) == len(finals) == 5


def test_flush_exports_what_is_queued_now_and_keeps_the_tracer_open():
    exporter = InMemorySpanExporter()
    tracer = RequestTracer(build_tracer_provider(TracingConfig(), exporter), MODEL)
    _end_spans(tracer, 3)
    # NOTE: the batch's schedule is 5 s; flush must not wait for it
    assert tracer.flush() and len(exporter.get_finished_spans()) == 3
    _end_spans(tracer, 2)  # still open: spans after a flush are exported too
    assert tracer.flush() and len(exporter.get_finished_spans()) == 5
    failing = RequestTracer(build_tracer_provider(TracingConfig(), _FailingExporter()), MODEL)
    _end_spans(failing, 1)
    failing.flush()
    assert failing.delivery().num_failed == 1
    assert RequestTracer.from_config(TracingConfig(), MODEL).flush()  # tracing off
    tracer.shutdown()


def test_failed_exports_are_counted_and_logged_with_the_destination(caplog):
    tracer = RequestTracer(
        build_tracer_provider(TracingConfig(), _FailingExporter()), MODEL, "http://c/v1/traces"
    )
    _end_spans(tracer, 4)
    with caplog.at_level(logging.ERROR, logger="engine.tracing"):
        tracer.shutdown()
    delivery = tracer.delivery()
    assert delivery == SpanDelivery(num_ended=4, num_exported=0, num_failed=4)
    assert delivery.num_undelivered == 4
    assert "4 of 4 request spans were not delivered to http://c/v1/traces" in caplog.text


def test_shutdown_with_the_receiver_gone_is_bounded_and_says_what_was_lost(caplog):
    with socket.socket() as unused:  # bound, never listening: connections are refused
        unused.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{unused.getsockname()[1]}/v1/traces"
        tracer = RequestTracer.from_config(TracingConfig(otlp_endpoint=endpoint), MODEL)
        _end_spans(tracer, 3)
        # NOTE: the exporter retries refused connections with 1, 2, 4 s back-offs for up to
        # 10 s per export; the flush bound cuts that short (bounded wait, generous limit).
        with caplog.at_level(logging.ERROR, logger="engine.tracing"):
            stopper = threading.Thread(target=tracer.shutdown, kwargs={"timeout_seconds": 0.5})
            stopper.start()
            stopper.join(timeout=60)
    assert not stopper.is_alive(), "shutdown did not return"
    delivery = tracer.delivery()
    assert (delivery.num_ended, delivery.num_exported) == (3, 0)
    assert f"3 of 3 request spans were not delivered to {endpoint}" in caplog.text


def _delivery_samples(tracer: RequestTracer) -> dict[str, float]:
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from engine.span_metrics import SpanDeliveryCollector

    registry = CollectorRegistry()
    registry.register(SpanDeliveryCollector(tracer.delivery, MODEL))
    text = generate_latest(registry).decode()
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.labels == {"model_name": MODEL}
    }


def test_span_delivery_is_on_metrics_while_tracing_is_on():
    ok = RequestTracer(build_tracer_provider(TracingConfig(), InMemorySpanExporter()), MODEL)
    _end_spans(ok, 3)
    ok.shutdown()
    assert _delivery_samples(ok) == {
        "tailwatch:trace_spans_ended_total": 3.0,
        "tailwatch:trace_spans_exported_total": 3.0,
        "tailwatch:trace_spans_export_failed_total": 0.0,
    }
    failing = RequestTracer(build_tracer_provider(TracingConfig(), _FailingExporter()), MODEL)
    _end_spans(failing, 2)
    failing.shutdown()
    assert _delivery_samples(failing)["tailwatch:trace_spans_export_failed_total"] == 2.0
    assert _delivery_samples(RequestTracer.from_config(TracingConfig(), MODEL)) == {}
