"""A step that raises: the engine fails that step's requests and goes on serving, or,
when failing them does not help, dies visibly (/live 503) and exits non-zero."""

from __future__ import annotations

import json
import signal

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from engine import metric_names as mn
from engine.server.launch import ServeOptions
from engine.step_failures import MAX_CONSECUTIVE_FAILED_STEPS
from engine.tracing import RequestTracer, TracingConfig, build_tracer_provider
from tailwatch.serve_cli import EXIT_ENGINE_DEAD
from tests.engine.server.conftest import live_server, tiny_config, wait_until
from tests.engine.server.test_serve_cli import serve_process  # noqa: F401 (a fixture)

ERRORS = mn.REQUEST_SUCCESS.name + "_total"
BODY = {"prompt": "fail me", "max_tokens": 8, "ignore_eos": True}


@pytest.fixture(scope="module")
def exporter():
    return InMemorySpanExporter()


@pytest.fixture(scope="module")
def provider(exporter):
    return build_tracer_provider(TracingConfig(), exporter)


@pytest.fixture(scope="module")
def server(provider):
    tracer = RequestTracer(provider, "tiny")
    options = ServeOptions(admin_token="test-admin-token")
    with live_server(tiny_config(max_num_seqs=4), options, tracer=tracer) as live:
        yield live


def _inject(server, num_steps: int) -> None:
    response = server.admin("PATCH", "/admin/config", json={"fail_next_steps": num_steps})
    assert response.status_code == 200, response.text


def _sse_events(http: httpx.Client, body: dict) -> list[str]:
    with http.stream("POST", "/v1/completions", json={**body, "stream": True}) as response:
        assert response.status_code == 200
        return [line[6:] for line in response.iter_lines() if line.startswith("data: ")]


def test_a_failed_step_fails_its_request_and_the_engine_serves_on(server, provider, exporter):
    errors_before = server.value(ERRORS, finished_reason="error")
    with server.http() as http:
        _inject(server, 1)
        failed = http.post("/v1/completions", json=BODY)
        assert failed.status_code == 500
        error = failed.json()["error"]
        assert error["code"] == "engine_step_failed" and error["type"] == "server_error"
        assert "aborted it" in error["message"]

        _inject(server, 1)
        events = _sse_events(http, BODY)
        assert events[-1] == "[DONE]"
        terminal = json.loads(events[-2])
        assert terminal["error"]["code"] == "engine_step_failed"
        assert terminal["error"]["type"] == "server_error"

        # later requests are served in full, streamed or not
        served = http.post("/v1/completions", json=BODY)
        assert served.status_code == 200, served.text
        assert served.json()["usage"]["completion_tokens"] == 8
        assert _sse_events(http, BODY)[-1] == "[DONE]"
        for probe in ("/live", "/ready", "/health"):
            assert http.get(probe).status_code == 200, probe

    engine = server.parts.async_engine.engine
    assert not engine.scheduler.requests
    assert engine.stats().kv_cache_usage == 0.0  # every KV block is free again
    front = server.parts.async_engine
    wait_until(lambda: front.num_in_flight == 0, timeout_seconds=10, what="no request in flight")
    assert server.value(ERRORS, finished_reason="error") - errors_before == 2
    provider.force_flush()
    failed_spans = [
        s for s in exporter.get_finished_spans() if s.attributes.get("error.type") == "engine_error"
    ]
    assert len(failed_spans) == 2
    assert all(s.status.status_code is StatusCode.ERROR for s in failed_spans)


def test_a_failure_in_a_batch_fails_every_request_of_that_batch_only(server):
    # two requests in one batch, a third after the failure: only the batch fails
    server.admin("PATCH", "/admin/config", json={"step_delay_seconds": 0.05})
    try:
        with server.http() as http:
            with http.stream("POST", "/v1/completions", json={**BODY, "stream": True}) as first:
                first_lines = first.iter_lines()
                assert next(line for line in first_lines if line.startswith("data: "))
                _inject(server, 1)
                rest = [line[6:] for line in first_lines if line.startswith("data: ")]
            assert "error" in json.loads(rest[-2]) and rest[-1] == "[DONE]"
            assert http.post("/v1/completions", json=BODY).status_code == 200
    finally:
        server.admin("PATCH", "/admin/config", json={"step_delay_seconds": 0})
    assert server.parts.async_engine.engine.stats().kv_cache_usage == 0.0


def test_fail_next_steps_is_validated(server):
    for value in (-1, 1.5, "2", True, 10**6):
        response = server.admin("PATCH", "/admin/config", json={"fail_next_steps": value})
        assert response.status_code == 400, (value, response.text)
        assert "fail_next_steps" in response.json()["error"]["message"]
    assert server.admin("GET", "/admin/config").json()["fail_next_steps"] == 0


def test_an_engine_that_keeps_failing_dies_visibly_and_exits_non_zero(serve_process):  # noqa: F811
    server = serve_process("--drain-timeout", "2")
    server.admin_patch({"fail_next_steps": MAX_CONSECUTIVE_FAILED_STEPS})
    url = server.base_url
    statuses = [
        httpx.post(f"{url}/v1/completions", json=BODY, timeout=30)
        for _ in range(MAX_CONSECUTIVE_FAILED_STEPS)
    ]
    codes = [(r.status_code, r.json()["error"]["code"]) for r in statuses]
    assert codes[:-1] == [(500, "engine_step_failed")] * (MAX_CONSECUTIVE_FAILED_STEPS - 1)
    assert codes[-1] == (503, "engine_dead")
    for probe in ("/live", "/ready", "/health"):
        assert httpx.get(f"{url}{probe}").status_code == 503, probe
    refused = httpx.post(f"{url}/v1/completions", json=BODY, timeout=30)
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "engine_dead"
    assert httpx.get(f"{url}/metrics").status_code == 200  # still observable
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(timeout=30) == EXIT_ENGINE_DEAD
    server._reader.join(timeout=10)
    log = "".join(server.lines)
    assert "the engine is dead" in log and "error: the engine died" in log
