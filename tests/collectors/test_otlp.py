"""The OTLP/HTTP receiver served by uvicorn on loopback: the engine's real OTLP exporter
delivers its request spans, and hand-made protobuf and OTLP/JSON bodies exercise
decoding, gzip, the size cap and the error codes."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import socket
import threading
import time
import tracemalloc

import httpx
import pytest
import uvicorn
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from collectors.otlp import OtlpError, ReceiverBusy, otlp_app, read_body
from collectors.request_records import SpanRecord, request_record
from engine.async_engine import AsyncEngine
from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams
from engine.tracing import RequestTracer, TracingConfig

MAX_BODY = 64 * 1024
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"
PARENT_ID = "a3ce929d0e0e4736"
PROTOBUF = {"content-type": "application/x-protobuf"}


class Receiver:
    def __init__(self) -> None:
        self.spans: list[SpanRecord] = []
        self.records = []
        self.num_calls = 0
        self.num_busy = 0  # answer this many more exports with ReceiverBusy

    def on_spans(self, spans: list[SpanRecord]) -> None:
        self.num_calls += 1
        if self.num_busy > 0:
            self.num_busy -= 1
            raise ReceiverBusy("busy for this test", retry_after_seconds=0.2)
        if any(s.name == "explode" for s in spans):
            raise RuntimeError("the store is down")
        if any(s.name == "busy" for s in spans):
            raise ReceiverBusy("the queue is full; retry later", retry_after_seconds=2.5)
        self.spans += spans

    def clear(self) -> None:
        self.spans.clear()
        self.records.clear()
        self.num_calls = self.num_busy = 0


@pytest.fixture(scope="module")
def receiver():
    sink = Receiver()
    app = otlp_app(sink.on_spans, on_requests=sink.records.extend, max_body_bytes=MAX_BODY)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    sink.url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1/traces"
    yield sink
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture()
def sink(receiver):
    receiver.clear()
    return receiver


@pytest.fixture(scope="module")
def _one_torch_thread():
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _kv(key, value) -> KeyValue:
    if isinstance(value, str):
        return KeyValue(key=key, value=AnyValue(string_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(int_value=value))


def _request(name="chat m", **attributes) -> ExportTraceServiceRequest:
    span = Span(
        trace_id=bytes.fromhex(TRACE_ID),
        span_id=bytes.fromhex(SPAN_ID),
        parent_span_id=bytes.fromhex(PARENT_ID),
        name=name,
        kind=Span.SPAN_KIND_SERVER,
        start_time_unix_nano=1_700_000_000_000_000_000,
        end_time_unix_nano=1_700_000_002_000_000_000,
        attributes=[_kv(k.replace("__", "."), v) for k, v in attributes.items()],
    )
    resource_spans = ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])
    resource_spans.resource.attributes.append(_kv("service.name", "svc"))
    return ExportTraceServiceRequest(resource_spans=[resource_spans])


def _status(response: httpx.Response) -> str:
    if response.headers["content-type"].startswith("application/json"):
        return json.loads(response.content)["message"]
    return Status.FromString(response.content).message


def test_engine_exporter_delivers_one_record_per_request(sink, _one_torch_thread):
    tracer = RequestTracer.from_config(TracingConfig(otlp_endpoint=sink.url), "tiny")
    front = AsyncEngine(LLMEngine(EngineConfig(max_model_len=256)), observers=[tracer])
    handles = {}
    requests = [("hello there", 1, "acme"), ("the quick brown fox", 5, "globex"), ("hi", 8, None)]

    def admitted(handle):
        handles[handle.request_id] = handle
        tracer.start_request(handle, {}, "text_completion", {})

    async def one(prompt, max_tokens, tenant):
        params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
        stream = front.submit(prompt, params, tenant=tenant, on_admitted=admitted)
        with stream:
            return [out async for out in stream][-1]

    async def scenario():
        front.start()
        try:
            return await asyncio.gather(*(one(*r) for r in requests))
        finally:
            front.shutdown()

    finals = asyncio.run(scenario())
    tracer.shutdown()  # flushes the batch processor to the receiver
    records = {r.request_id: r for r in sink.records}
    assert sorted(records) == sorted(f.request_id for f in finals)
    assert len(sink.records) == len(finals)
    for final, (_, max_tokens, tenant) in zip(finals, requests, strict=True):
        r = records[final.request_id]
        assert r.output_tokens == final.num_output_tokens == max_tokens
        assert r.input_tokens == final.num_prompt_tokens
        assert r.cached_tokens == final.num_cached_tokens
        assert r.trace_id == handles[final.request_id].trace_id
        assert (r.tenant, r.model, r.service) == (tenant, "tiny", "tailwatch-engine")
        assert (r.finish_reason, r.preemptions, r.is_error) == (final.finish_reason, 0, False)
        assert 0 < r.ttft_seconds <= r.e2e_seconds < 30
        assert 0 <= r.queue_seconds <= r.ttft_seconds
        assert r.prefill_seconds >= 0 and r.decode_seconds >= 0
        expected_tpot = (
            0.0 if max_tokens == 1 else (r.e2e_seconds - r.ttft_seconds) / (max_tokens - 1)
        )
        assert r.tpot_seconds == pytest.approx(expected_tpot)
        assert abs(r.arrival - time.time()) < 60


def test_protobuf_and_gzip_decode_to_the_same_span(sink):
    body = _request(gen_ai__operation__name="chat", gen_ai__response__id="r1").SerializeToString()
    plain = httpx.post(sink.url, content=body, headers=PROTOBUF)
    zipped = httpx.post(
        sink.url, content=gzip.compress(body), headers={**PROTOBUF, "content-encoding": "gzip"}
    )
    for response in (plain, zipped):
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/x-protobuf"
        assert response.content == b""  # an empty ExportTraceServiceResponse
    first, second = sink.spans
    assert first == second
    assert (first.trace_id, first.span_id, first.parent_span_id) == (TRACE_ID, SPAN_ID, PARENT_ID)
    assert (first.start, first.end, first.kind) == (1_700_000_000.0, 1_700_000_002.0, 2)
    assert first.service_name == "svc"
    assert [r.request_id for r in sink.records] == ["r1", "r1"]
    assert sink.records[0].e2e_seconds == 2.0  # no gen_ai.latency.e2e: the span's duration


def test_otlp_json_hex_ids_and_a_vllm_span(sink):
    document = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        {"key": "service.name", "value": {"stringValue": "vllm"}},
                        {"key": "service.instance.id", "value": {"stringValue": "replica-3"}},
                    ]
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "vllm.tracing.otel"},
                        "spans": [
                            {
                                "traceId": TRACE_ID,
                                "spanId": SPAN_ID,
                                "parentSpanId": "",
                                "name": "llm_request",
                                "kind": 2,
                                "startTimeUnixNano": "1700000000000000000",
                                "endTimeUnixNano": "1700000001500000000",
                                "attributes": [
                                    {
                                        "key": "gen_ai.request.id",
                                        "value": {"stringValue": "cmpl-9"},
                                    },
                                    {
                                        "key": "gen_ai.usage.prompt_tokens",
                                        "value": {"intValue": "12"},
                                    },
                                    {
                                        "key": "gen_ai.usage.completion_tokens",
                                        "value": {"intValue": "5"},
                                    },
                                    {"key": "gen_ai.latency.e2e", "value": {"doubleValue": 1.5}},
                                    {
                                        "key": "gen_ai.latency.time_to_first_token",
                                        "value": {"doubleValue": 0.3},
                                    },
                                    {
                                        "key": "gen_ai.latency.time_in_queue",
                                        "value": {"doubleValue": 0.1},
                                    },
                                    {
                                        "key": "gen_ai.response.finish_reasons",
                                        "value": {"stringValue": '["length"]'},
                                    },
                                ],
                                "events": [{"name": "x", "timeUnixNano": "1700000000500000000"}],
                                "unknownField": 1,
                            }
                        ],
                    }
                ],
            }
        ]
    }
    response = httpx.post(sink.url, json=document)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {}
    (span,) = sink.spans
    assert (span.trace_id, span.span_id, span.parent_span_id) == (TRACE_ID, SPAN_ID, None)
    assert span.events[0].name == "x" and span.events[0].time == 1_700_000_000.5
    (r,) = sink.records
    assert (r.request_id, r.trace_id, r.replica, r.service) == (
        "cmpl-9",
        TRACE_ID,
        "replica-3",
        "vllm",
    )
    assert (r.input_tokens, r.output_tokens, r.finish_reason, r.model) == (12, 5, "length", None)
    assert (r.queue_seconds, r.ttft_seconds, r.e2e_seconds) == (0.1, 0.3, 1.5)
    assert r.tpot_seconds == pytest.approx(1.2 / 4)
    assert r.prefill_seconds is None and r.cached_tokens is None and r.preemptions is None


@pytest.mark.parametrize(
    ("headers", "body", "message"),
    [
        (PROTOBUF, b"\x0a\x05abc", "not an OTLP protobuf"),
        ({"content-type": "application/json"}, b"{not json", "not JSON"),
        ({"content-type": "application/json"}, b"[]", "must be an object"),
        (
            {"content-type": "application/json"},
            json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}),
            "not a hex string",
        ),
        (
            {"content-type": "application/json"},
            json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "abcd"}]}]}]}),
            "must be 16 hex digits",
        ),
        ({**PROTOBUF, "content-encoding": "gzip"}, b"not gzip at all", "not valid gzip"),
        (
            {**PROTOBUF, "content-encoding": "gzip"},
            gzip.compress(b"x" * 100, mtime=0)[:-12],
            "truncated",
        ),
    ],
)
def test_undecodable_bodies_get_400_naming_the_problem(sink, headers, body, message):
    response = httpx.post(sink.url, content=body, headers=headers)
    assert response.status_code == 400
    assert message in _status(response)
    assert sink.spans == []


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"content-type": "text/plain"}, "unsupported Content-Type 'text/plain'"),
        ({**PROTOBUF, "content-encoding": "br"}, "unsupported Content-Encoding 'br'"),
    ],
)
def test_unsupported_content_type_or_encoding_gets_415(sink, headers, message):
    body = _request(gen_ai__operation__name="chat", gen_ai__response__id="r1").SerializeToString()
    response = httpx.post(sink.url, content=body, headers=headers)
    assert response.status_code == 415
    assert message in _status(response)
    assert sink.spans == []


def test_oversized_bodies_get_413_declared_streamed_and_inflated(sink):
    big = b"\x00" * (MAX_BODY + 1)
    declared = httpx.post(sink.url, content=big, headers=PROTOBUF)
    streamed = httpx.post(sink.url, content=iter([big[:40_000], big[40_000:]]), headers=PROTOBUF)
    bomb = gzip.compress(b"\x00" * (32 * 1024 * 1024))
    assert len(bomb) < MAX_BODY
    inflated = httpx.post(sink.url, content=bomb, headers={**PROTOBUF, "content-encoding": "gzip"})
    assert "transfer-encoding" not in declared.request.headers
    assert streamed.request.headers["transfer-encoding"] == "chunked"
    for response in (declared, streamed, inflated):
        assert response.status_code == 413
        assert "byte limit" in _status(response)
    assert "decompressed" in _status(inflated)
    assert sink.spans == []


def test_a_gzip_bomb_is_inflated_only_up_to_the_cap():
    bomb = gzip.compress(b"\x00" * (64 * 1024 * 1024))

    async def chunks():
        for i in range(0, len(bomb), 8192):
            yield bomb[i : i + 8192]

    tracemalloc.start()
    try:
        with pytest.raises(OtlpError) as raised:
            asyncio.run(read_body(chunks(), "gzip", 1024 * 1024, None))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert raised.value.status == 413
    assert peak < 8 * 1024 * 1024  # 64 MiB inflated would show here


def test_a_failing_sink_gets_503_so_the_exporter_retries(sink):
    response = httpx.post(
        sink.url, content=_request("explode").SerializeToString(), headers=PROTOBUF
    )
    assert response.status_code == 503
    assert "retry" in _status(response)


def test_a_busy_sink_gets_503_with_retry_after_and_no_traceback(sink, caplog):
    with caplog.at_level(logging.WARNING, logger="collectors.otlp"):
        response = httpx.post(
            sink.url, content=_request("busy").SerializeToString(), headers=PROTOBUF
        )
    assert response.status_code == 503
    assert response.headers["retry-after"] == "3"  # whole seconds, rounded up
    assert Status.FromString(response.content).code == 14  # UNAVAILABLE
    assert _status(response) == "the queue is full; retry later"
    assert "Traceback" not in caplog.text and "sink failed" not in caplog.text
    assert sink.spans == [] and sink.records == []


def test_the_engine_exporter_retries_a_busy_receiver_and_delivers_each_span_once(sink):
    """The installed OTLP/HTTP exporter retries our 503 after its Retry-After: nothing is
    lost to back-pressure, nothing stored twice."""
    sink.num_busy = 2
    tracer = RequestTracer.from_config(TracingConfig(otlp_endpoint=sink.url), "tiny")
    otel = tracer._provider.get_tracer("test")
    for i in range(5):
        otel.start_span(f"chat tiny {i}").end()
    tracer.shutdown(timeout_seconds=30)  # bounded; two 1 s Retry-After waits fit
    assert sink.num_calls == 3  # busy, busy, accepted
    assert sorted(s.name for s in sink.spans) == [f"chat tiny {i}" for i in range(5)]
    delivery = tracer.delivery()
    assert (delivery.num_ended, delivery.num_exported, delivery.num_failed) == (5, 5, 0)


@pytest.mark.parametrize(
    ("content_type", "empty_response"),
    [("application/x-protobuf", b""), ("application/json", b"{}")],
)
def test_an_empty_export_succeeds_and_calls_no_sink(sink, content_type, empty_response):
    response = httpx.post(sink.url, content=b"", headers={"content-type": content_type})
    assert (response.status_code, response.content) == (200, empty_response)
    assert response.headers["content-type"] == content_type
    assert sink.spans == [] and sink.records == []


def _span(name="chat m", status_code=0, resource=None, **attributes) -> SpanRecord:
    return SpanRecord(
        trace_id=TRACE_ID,
        span_id=SPAN_ID,
        parent_span_id=None,
        name=name,
        kind=2,
        start=10.0,
        end=0.0,  # no usable duration either
        attributes={k.replace("__", "."): v for k, v in attributes.items()},
        events=(),
        status_code=status_code,
        status_message="",
        resource=resource or {},
        scope="s",
    )


def test_only_request_spans_become_records_and_missing_attributes_give_none():
    assert request_record(_span("GET /v1/models", http__method="GET")) is None
    assert request_record(_span("chat m", gen_ai__operation__name="chat")) is None  # no id
    assert (
        request_record(
            _span("embeddings m", gen_ai__operation__name="embeddings", gen_ai__response__id="e")
        )
        is None
    )
    assert request_record(_span("llm_request")) is None
    bare = request_record(_span(gen_ai__operation__name="chat", gen_ai__response__id="r"))
    assert bare.request_id == "r" and bare.arrival == 10.0
    assert all(
        getattr(bare, f) is None
        for f in (
            "tenant",
            "model",
            "replica",
            "queue_seconds",
            "ttft_seconds",
            "tpot_seconds",
            "e2e_seconds",
            "input_tokens",
            "output_tokens",
            "finish_reason",
        )
    )
    odd = request_record(
        _span(
            status_code=2,
            resource={"server.address": "10.0.0.7"},
            gen_ai__operation__name="chat",
            gen_ai__response__id="r",
            gen_ai__latency__e2e="slow",
            gen_ai__latency__time_to_first_token=True,
            gen_ai__usage__output_tokens=1,
            gen_ai__response__finish_reasons=["abort"],
            server__port=8000,
        )
    )
    assert (odd.e2e_seconds, odd.ttft_seconds, odd.tpot_seconds) == (None, None, 0.0)
    assert (odd.finish_reason, odd.is_error, odd.replica) == ("abort", True, "10.0.0.7")
    with_port = request_record(
        _span(
            gen_ai__operation__name="chat",
            gen_ai__response__id="r",
            server__address="h",
            server__port=8000,
        )
    )
    assert with_port.replica == "h:8000"
