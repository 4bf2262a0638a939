"""Received traces in the store: round trips and idempotency on SQLite and PostgreSQL, the
trace writer's queue (back-pressure, retries, flush on close), the bundled engine's real
OTLP exporter under the load generator matched record for record against the client's
measurements, and ``tailwatch collect`` receiving an export end to end."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest
import uvicorn
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from prometheus_client import CollectorRegistry
from sqlalchemy.exc import DataError, OperationalError

from collectors import collector_metrics as cm
from collectors.otlp import ReceiverBusy
from collectors.request_records import RequestRecord, SpanEvent, SpanRecord, request_record
from collectors.store import Store, sqlite_url
from collectors.store.retention import RetentionPolicy
from collectors.trace_writer import TraceWriter
from tailwatch.collect_daemon import daemon_app

T0 = 1_700_000_000.0
PROTOBUF = {"content-type": "application/x-protobuf"}


def span(
    i: int,
    trace: int = 1,
    *,
    start: float = T0,
    tenant: str | None = "acme",
    request: bool = True,
    **attributes,
) -> SpanRecord:
    attrs = {
        "gen_ai.usage.input_tokens": 10 + i,
        "gen_ai.usage.output_tokens": 5,
        "gen_ai.latency.time_to_first_token": 0.25,
        "gen_ai.latency.e2e": 1.25,
        "gen_ai.response.finish_reasons": ["length"],
        "gen_ai.response.model": "tiny",
        "gen_ai.request.stop_sequences": ["\n", "END"],
        "gen_ai.request.temperature": 0.0,
        "gen_ai.request.stream": True,
        **attributes,
    }
    if request:
        attrs |= {"gen_ai.operation.name": "chat", "gen_ai.response.id": f"req-{trace}-{i}"}
    if tenant is not None:
        attrs["tailwatch.tenant"] = tenant
    return SpanRecord(
        trace_id=f"{trace:032x}",
        span_id=f"{i + 1:016x}",
        parent_span_id=None if i == 0 else f"{1:016x}",
        name="chat tiny" if request else f"step {i}",
        kind=2,
        start=start + i,
        end=start + i + 1.25,
        attributes=attrs,
        events=(
            SpanEvent("tailwatch.request.scheduled", start + i + 0.01, {}),
            SpanEvent("tailwatch.request.prefill_chunk", start + i + 0.1, {"n": 3, "x": 0.5}),
        ),
        status_code=0,
        status_message="",
        resource={"service.name": "engine", "service.instance.id": "replica-a"},
        scope="tailwatch.engine",
    )


# -- the store -------------------------------------------------------------------------------


def test_spans_round_trip_and_a_retried_export_is_stored_once(store):
    spans = [span(i) for i in range(3)] + [span(0, trace=2, request=False)]
    assert store.write_spans(spans) == 4
    assert store.write_spans(spans) == 0  # the exporter's retry
    assert store.write_spans([spans[1], spans[1], span(7)]) == 1  # repeated within a batch
    assert store.trace(f"{1:032x}") == [*spans[:3], span(7)]  # by start time, plain data
    assert store.trace(f"{2:032X}") == [spans[3]]  # any case
    assert store.trace("f" * 32) == []
    assert store.write_spans([]) == 0


def test_request_records_round_trip_filter_and_order_by_arrival(store):
    records = [request_record(span(i, start=T0 + 10 * (3 - i))) for i in range(3)]
    other = request_record(
        span(
            9,
            trace=2,
            tenant=None,
            **{"gen_ai.response.finish_reasons": ["stop"], "gen_ai.response.model": "big"},
        )
    )
    assert store.write_requests([*records, other]) == 4
    assert store.write_requests(records) == 0
    arrivals = [r.arrival for r in store.requests(0, math.inf)]
    assert arrivals == sorted(arrivals) and len(arrivals) == 4
    assert store.requests(0, math.inf, tenant="acme") == sorted(records, key=lambda r: r.arrival)
    assert store.requests(0, math.inf, model="big") == [other]
    assert store.requests(0, math.inf, finish_reason="stop") == [other]
    assert (
        store.requests(0, math.inf, replica="replica-a", limit=2)
        == sorted([*records, other], key=lambda r: r.arrival)[:2]
    )
    assert store.requests(0, math.inf, replica="replica-b") == []
    # the window includes both ends
    first = min(records, key=lambda r: r.arrival)
    assert store.requests(first.arrival, first.arrival) == [first]
    assert store.request("req-1-2") == records[2]
    assert store.request("nope") is None
    assert isinstance(store.request("req-1-0"), RequestRecord)
    with pytest.raises(ValueError, match="limit"):
        store.requests(0, 1, limit=0)


def test_maintain_deletes_old_spans_and_request_records_in_bounded_batches(store):
    day = 86400.0
    old = [span(i, trace=1, start=T0 - 20 * day) for i in range(3)]  # past 14 days
    middle = [span(i, trace=2, start=T0 - 20 * day + 10 * day) for i in range(2)]  # 10 days
    store.write_spans([*old, *middle])
    store.write_requests([request_record(s) for s in (*old, *middle)])
    ancient = request_record(span(0, trace=3, start=T0 - 40 * day))  # past 30 days
    store.write_requests([ancient])
    policy = RetentionPolicy(max_trace_rows_deleted_per_call=2)

    first = store.maintain(T0, policy)
    assert (first.spans_deleted, first.request_records_deleted) == (2, 1)
    assert first.more_to_do  # a third old span is left for the next call
    second = store.maintain(T0, policy)
    assert (second.spans_deleted, second.request_records_deleted) == (1, 0)
    assert not store.maintain(T0, policy).more_to_do

    assert store.trace(f"{1:032x}") == []  # spans past the span retention are gone
    assert len(store.trace(f"{2:032x}")) == 2  # younger ones stay
    # request records follow the roll-up retention (30 days): only the ancient one went
    assert store.request(ancient.request_id) is None
    assert {r.request_id for r in store.requests(0, math.inf)} == {
        request_record(s).request_id for s in (*old, *middle)
    }


def test_odd_values_are_kept_or_made_storable(store):
    long_name = "x" * 400  # over String(255): PostgreSQL would refuse it whole
    odd = replace(
        span(0),
        name=long_name,
        attributes={"nan": math.nan, "nested": {"a": [1, "b", None]}, "big": 2**62},
    )
    assert store.write_spans([odd]) == 1
    (stored,) = store.trace(odd.trace_id)
    assert stored.name == long_name[:255]
    assert math.isnan(stored.attributes["nan"])
    assert stored.attributes["nested"] == {"a": [1, "b", None]}
    assert stored.attributes["big"] == 2**62
    record = replace(request_record(span(0)), ttft_seconds=math.nan)
    assert store.write_requests([record]) == 1
    assert store.request(record.request_id).ttft_seconds is None  # never a NaN aggregate


def test_concurrent_writers_of_one_export_store_each_span_once(store):
    spans = [span(i, trace=3) for i in range(200)]
    barrier = threading.Barrier(2)
    written: list[int] = []

    def write() -> None:
        barrier.wait(timeout=30)
        written.append(store.write_spans(spans))

    threads = [threading.Thread(target=write) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(written) == 2 and sum(written) == 200, written
    assert len(store.trace(f"{3:032x}")) == 200


# -- the trace writer ------------------------------------------------------------------------


class ScriptedStore:
    """Delegates to a real store; ``failures`` are raised, in order, before (or, for a
    ``"lost"`` entry, after) each write; ``gate`` holds writes until it is set."""

    def __init__(self, store: Store, failures=(), gate: threading.Event | None = None):
        self.store = store
        self.failures = list(failures)
        self.gate = gate
        self.num_calls = 0

    def _failure(self):
        self.num_calls += 1
        if self.gate is not None:
            assert self.gate.wait(timeout=30)
        return self.failures.pop(0) if self.failures else None

    def write_spans(self, spans):
        failure = self._failure()
        if failure == "lost":
            self.store.write_spans(spans)
            raise OperationalError("COMMIT", {}, Exception("connection lost"))
        if failure is not None:
            raise failure
        return self.store.write_spans(spans)

    def write_requests(self, records):
        return self.store.write_requests(records)


def down() -> OperationalError:
    return OperationalError("INSERT", {}, Exception("database is unavailable"))


def metric(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


@pytest.fixture
def sqlite_store(tmp_path) -> Iterator[Store]:
    s = Store(sqlite_url(tmp_path / "tw.db"))
    yield s
    s.close()


def fast_writer(target, registry, **kwargs) -> TraceWriter:
    return TraceWriter(target, registry, retry_initial_seconds=0.001, **kwargs)


def test_the_writer_retries_an_unavailable_database_and_loses_nothing(sqlite_store):
    registry = CollectorRegistry()
    flaky = ScriptedStore(sqlite_store, [down(), down(), "lost", down()])
    writer = fast_writer(flaky, registry)
    exports = [[span(i, trace=t) for i in range(3)] for t in (1, 2)]

    async def go():
        writer.start()
        for spans in exports:
            writer.on_spans(spans)
        await writer.close()

    asyncio.run(go())
    assert len(sqlite_store.trace(f"{1:032x}")) == len(sqlite_store.trace(f"{2:032x}")) == 3
    assert len(sqlite_store.requests(0, math.inf)) == 6
    assert flaky.num_calls == 6  # four failures, then one success per export
    assert metric(registry, "tailwatch_collector_spans_received_total") == 6
    assert metric(registry, "tailwatch_collector_spans_stored_total") == 6  # lost reply: once
    assert metric(registry, "tailwatch_collector_request_records_total") == 6
    assert metric(registry, "tailwatch_collector_trace_write_errors_total") == 4
    assert metric(registry, "tailwatch_collector_queued_spans") == 0
    for reason in (cm.DROPPED_QUEUE_FULL, cm.DROPPED_REJECTED, cm.DROPPED_SHUTDOWN):
        assert metric(registry, "tailwatch_collector_spans_dropped_total", reason=reason) == 0


def test_an_export_the_store_refuses_is_dropped_counted_and_logged(sqlite_store, caplog):
    registry = CollectorRegistry()
    refusing = ScriptedStore(sqlite_store, [DataError("INSERT", {}, Exception("too long"))])
    writer = fast_writer(refusing, registry)

    async def go():
        writer.start()
        writer.on_spans([span(0, trace=1), span(1, trace=1)])
        writer.on_spans([span(0, trace=2)])
        await writer.close()

    with caplog.at_level(logging.ERROR, logger="collectors.trace_writer"):
        asyncio.run(go())
    assert sqlite_store.trace(f"{1:032x}") == []
    assert len(sqlite_store.trace(f"{2:032x}")) == 1  # the next export is not held up
    assert metric(registry, "tailwatch_collector_spans_dropped_total", reason="rejected") == 2
    assert "the store refused 2 spans" in caplog.text


def test_a_full_queue_refuses_exports_with_503_until_it_drains(sqlite_store, caplog):
    registry = CollectorRegistry()
    gate = threading.Event()
    writer = fast_writer(ScriptedStore(sqlite_store, gate=gate), registry, max_queued_spans=4)
    app = daemon_app(registry, writer.on_spans)

    def body(trace: int, num_spans: int) -> bytes:
        return export([span(i, trace=trace) for i in range(num_spans)]).SerializeToString()

    async def go():
        writer.start()
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://collector") as client:
            first = await client.post("/v1/traces", content=body(1, 3), headers=PROTOBUF)
            full = await client.post("/v1/traces", content=body(2, 2), headers=PROTOBUF)
            again = await client.post("/v1/traces", content=body(3, 2), headers=PROTOBUF)
            metrics = await client.get("/metrics")
            gate.set()  # the database answers again
            for _ in range(500):  # the queue drains
                if writer.num_queued_spans == 0:
                    break
                await asyncio.sleep(0.01)
            retried = await client.post("/v1/traces", content=body(2, 2), headers=PROTOBUF)
        await writer.close()
        return first, full, again, metrics, retried

    with caplog.at_level(logging.INFO, logger="collectors.trace_writer"):
        first, full, again, metrics, retried = asyncio.run(go())
    assert first.status_code == 200 and retried.status_code == 200
    for refused in (full, again):
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "1"
    assert metrics.status_code == 200  # /metrics answers directly, no redirect
    assert 'tailwatch_collector_spans_dropped_total{reason="queue_full"} 4.0' in metrics.text
    assert "tailwatch_collector_queued_spans 3.0" in metrics.text
    assert caplog.text.count("trace queue full") == 1  # once per full spell, not per export
    assert "4 spans were refused with 503" in caplog.text
    assert len(sqlite_store.trace(f"{1:032x}")) == 3
    assert len(sqlite_store.trace(f"{2:032x}")) == 2  # the exporter's retry got in
    assert sqlite_store.trace(f"{3:032x}") == []


def test_an_export_larger_than_the_queue_is_taken_when_the_queue_is_empty(sqlite_store):
    writer = fast_writer(sqlite_store, CollectorRegistry(), max_queued_spans=2)

    async def go():
        writer.on_spans([span(i) for i in range(5)])  # never retryable into a smaller queue
        with pytest.raises(ReceiverBusy):
            writer.on_spans([span(0, trace=2)])
        await writer.close()  # a writer never started writes on close

    asyncio.run(go())
    assert len(sqlite_store.trace(f"{1:032x}")) == 5


def test_close_gives_up_on_a_dead_database_after_its_timeout_and_says_so(sqlite_store, caplog):
    registry = CollectorRegistry()
    dead = ScriptedStore(sqlite_store, [down() for _ in range(10_000)])
    writer = TraceWriter(dead, registry, retry_initial_seconds=0.01, retry_max_seconds=0.05)

    async def go():
        writer.start()
        writer.on_spans([span(0), span(1)])
        writer.on_spans([span(0, trace=2)])
        await writer.close(timeout_seconds=0.3)
        with pytest.raises(ReceiverBusy, match="shutting down"):
            writer.on_spans([span(0, trace=3)])

    with caplog.at_level(logging.WARNING, logger="collectors.trace_writer"):
        asyncio.run(go())
    assert metric(registry, "tailwatch_collector_spans_dropped_total", reason="shutdown") == 3
    assert "dropped 3 queued spans" in caplog.text
    assert writer.num_queued_spans == 0
    assert sqlite_store.trace(f"{1:032x}") == []


def test_spans_the_database_did_not_take_at_shutdown_are_written_by_the_next_start(
    sqlite_store, tmp_path, caplog
):
    saved = tmp_path / "spans.pickle"
    registry = CollectorRegistry()
    dead = ScriptedStore(sqlite_store, [down() for _ in range(10_000)])
    writer = TraceWriter(
        dead, registry, retry_initial_seconds=0.01, retry_max_seconds=0.05, spill_path=saved
    )

    async def first_run():
        writer.start()
        writer.on_spans([span(0), span(1)])
        writer.on_spans([span(0, trace=2)])
        await writer.close(timeout_seconds=0.2)

    with caplog.at_level(logging.WARNING, logger="collectors.trace_writer"):
        asyncio.run(first_run())
    assert "saved 3 queued spans to" in caplog.text
    assert metric(registry, "tailwatch_collector_spans_dropped_total", reason="shutdown") == 0
    assert saved.exists() and sqlite_store.trace(f"{1:032x}") == []

    restarted = fast_writer(sqlite_store, CollectorRegistry(), spill_path=saved)

    async def second_run():
        restarted.start()
        assert restarted.num_queued_spans == 3
        await restarted.close()

    asyncio.run(second_run())
    assert not saved.exists()
    assert sqlite_store.trace(f"{1:032x}") == [span(0), span(1)]
    assert sqlite_store.trace(f"{2:032x}") == [span(0, trace=2)]
    assert sqlite_store.request("req-1-0") is not None


def test_an_unreadable_span_file_is_moved_aside_not_fatal(sqlite_store, tmp_path, caplog):
    saved = tmp_path / "spans.pickle"
    saved.write_bytes(b"garbage")
    writer = fast_writer(sqlite_store, CollectorRegistry(), spill_path=saved)

    async def go():
        writer.start()
        await writer.close()

    with caplog.at_level(logging.ERROR, logger="collectors.trace_writer"):
        asyncio.run(go())
    assert "cannot read saved spans" in caplog.text
    assert (tmp_path / "spans.pickle.unreadable").exists() and not saved.exists()


# -- the engine's exporter under the load generator ------------------------------------------


def export(spans: list[SpanRecord]) -> ExportTraceServiceRequest:
    def kv(key, value) -> KeyValue:
        if isinstance(value, str):
            return KeyValue(key=key, value=AnyValue(string_value=value))
        if isinstance(value, bool):
            return KeyValue(key=key, value=AnyValue(bool_value=value))
        if isinstance(value, float):
            return KeyValue(key=key, value=AnyValue(double_value=value))
        if isinstance(value, int):
            return KeyValue(key=key, value=AnyValue(int_value=value))
        any_value = AnyValue()
        any_value.array_value.values.extend(kv("", v).value for v in value)
        return KeyValue(key=key, value=any_value)

    resource_spans = ResourceSpans(scope_spans=[ScopeSpans()])
    for s in spans:
        resource_spans.scope_spans[0].spans.append(
            Span(
                trace_id=bytes.fromhex(s.trace_id),
                span_id=bytes.fromhex(s.span_id),
                name=s.name,
                kind=s.kind,
                start_time_unix_nano=int(s.start * 1e9),
                end_time_unix_nano=int(s.end * 1e9),
                attributes=[kv(k, v) for k, v in s.attributes.items()],
            )
        )
    resource_spans.resource.attributes.append(kv("service.name", "engine"))
    return ExportTraceServiceRequest(resource_spans=[resource_spans])


@contextlib.contextmanager
def receiver(store: Store) -> Iterator[tuple[str, TraceWriter]]:
    """The daemon's app and trace writer on loopback, run as ``tailwatch collect`` runs
    them: on exit the server stops, then the writer flushes."""
    registry = CollectorRegistry()
    writer = TraceWriter(store, registry)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(daemon_app(registry, writer.on_spans), log_level="warning")
    )

    async def main() -> None:
        writer.start()
        try:
            await server.serve(sockets=[sock])
        finally:
            await writer.close()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the receiver did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", writer
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
    assert not thread.is_alive(), "the receiver did not stop"


def received(writer: TraceWriter) -> float:
    return metric(writer.metrics.registry, "tailwatch_collector_spans_received_total")


@pytest.fixture(scope="module")
def _one_torch_thread():
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def test_engine_spans_under_load_match_the_load_generators_records(sqlite_store, _one_torch_thread):
    from engine.tracing import RequestTracer, TracingConfig
    from loadgen import build_schedule, parse_workload, run_schedule
    from loadgen.replicas import bundled_replicas

    workload = parse_workload(
        {
            "rate": 8,
            "duration": 1.5,
            "arrivals": "constant",
            "prompt_tokens": {"kind": "uniform", "min": 8, "max": 64},
            "output_tokens": {"kind": "uniform", "min": 1, "max": 12},
            "tenants": {"acme": 1, "globex": 1},
            "seed": 5,
        }
    )
    engine = {"model": "tiny", "max_model_len": 256, "num_gpu_blocks": 128}
    with receiver(sqlite_store) as (collector_url, writer):
        tracer = RequestTracer.from_config(
            TracingConfig(otlp_endpoint=collector_url + "/v1/traces"), "tiny"
        )
        try:
            with bundled_replicas(1, engine, tracers=[tracer]) as (url,):
                state = asyncio.run(run_schedule([url], build_schedule([workload])))
                # NOTE: a span ends as the engine finishes its request, which may trail the
                # client's [DONE]; the batch processor exports every 5 s. Wait until the
                # receiver has taken every one before the replica stops.
                deadline = time.monotonic() + 30
                while received(writer) < len(state.results):
                    assert time.monotonic() < deadline, "the engine's spans did not arrive"
                    time.sleep(0.1)
        finally:
            tracer.shutdown()  # the real OTLPSpanExporter's last export
    # the receiver has stopped and its writer flushed: everything accepted is stored
    client = state.results
    assert 10 <= len(client) <= 14
    assert all(r.succeeded for r in client), [r.error for r in client]
    stored = sqlite_store.requests(0, math.inf)
    assert sorted(r.request_id for r in stored) == sorted(r.response_id for r in client)
    assert len({r.response_id for r in client}) == len(client)  # one to one, no extras
    by_id = {r.request_id: r for r in stored}
    for result in client:
        record = by_id[result.response_id]
        assert (record.input_tokens, record.output_tokens) == (
            result.prompt_tokens,
            result.output_tokens,
        )
        assert record.finish_reason == result.finish_reason == "length"  # ignore_eos
        assert (record.tenant, record.model, record.is_error) == (result.tenant, "tiny", False)
        # the client's intervals contain the server's: send → first token, send → [DONE]
        assert 0 < record.ttft_seconds <= result.ttft_seconds
        assert record.ttft_seconds <= record.e2e_seconds <= result.e2e_seconds
        (trace,) = [s for s in sqlite_store.trace(record.trace_id) if s.span_id == record.span_id]
        assert trace.attributes["gen_ai.response.id"] == result.response_id
    assert received(writer) == len(client)  # one span per request, none twice
    assert metric(writer.metrics.registry, "tailwatch_collector_request_records_total") == len(
        client
    )


# -- the daemon ------------------------------------------------------------------------------


def test_the_daemon_receives_otlp_stores_it_and_flushes_on_sigterm(tmp_path):
    db = tmp_path / "tw.db"
    command = [sys.executable, "-m", "tailwatch.cli", "collect", "--listen", "127.0.0.1:0"]
    command += ["--db-url", f"sqlite:///{db}"]
    daemon = subprocess.Popen(
        command,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        cwd=tmp_path,  # no ./tailwatch.yaml: no scrape targets
    )
    try:
        seen = []  # other start-up lines (e.g. "no GPU telemetry") may come first
        for _ in range(20):
            seen.append(daemon.stderr.readline())
            if "OTLP traces at" in seen[-1] or not seen[-1]:
                break
        line = seen[-1]
        assert line.startswith("no scrape targets: receiving traces only;"), "".join(seen)
        found = re.search(r"OTLP traces at (http://127\.0\.0\.1:\d+)/v1/traces", line)
        assert found, line
        base = found.group(1)
        body = export([span(i, trace=5) for i in range(3)]).SerializeToString()
        for _ in range(2):  # an exporter's retry of the same export
            reply = httpx.post(base + "/v1/traces", content=body, headers=PROTOBUF, timeout=10)
            assert reply.status_code == 200, reply.text
        metrics = httpx.get(base + "/metrics", timeout=10)
        assert metrics.status_code == 200
        assert "tailwatch_collector_spans_received_total 6.0" in metrics.text
        daemon.send_signal(signal.SIGTERM)  # at once: what was accepted must still be written
        assert daemon.wait(timeout=20) == 0
        assert "collector stopped" in daemon.stderr.read()
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    store = Store(f"sqlite:///{db}")
    try:
        assert len(store.trace(f"{5:032x}")) == 3
        records = store.requests(0, math.inf)
        assert sorted(r.request_id for r in records) == ["req-5-0", "req-5-1", "req-5-2"]
        assert {(r.service, r.tenant, r.output_tokens) for r in records} == {("engine", "acme", 5)}
    finally:
        store.close()
