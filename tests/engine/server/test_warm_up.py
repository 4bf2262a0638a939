"""The start-up warm-up request is no client's: it counts in no client-facing metric and
opens no span, so a freshly started server reads zero everywhere (as vLLM's warm-up)."""

from __future__ import annotations

import httpx
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from engine import metric_names as mn
from engine.server.launch import ServeOptions
from engine.tracing import RequestTracer, TracingConfig, build_tracer_provider
from tests.engine.server.conftest import live_server, tiny_config

# Counted per HTTP answer (the readiness probes the test itself sends), not per request;
# the configuration as labels.
_NOT_PER_REQUEST = {mn.HTTP_RESPONSES.name, mn.CACHE_CONFIG_INFO_NAME}


def _counted(server) -> dict[tuple[str, frozenset], float]:
    """Every counter and histogram sample of the engine's own families (not gauges)."""
    gauges = {spec.name for spec in mn.ALL_SPECS if spec.kind == "gauge"}
    return {
        (name, labels): value
        for (name, labels), value in server.samples().items()
        if name.startswith(("vllm:", "tailwatch:"))
        and not name.endswith("_created")
        and name not in gauges
        and not any(name.startswith(skip) for skip in _NOT_PER_REQUEST)
    }


def test_a_freshly_started_server_counts_no_request_and_traces_none():
    exporter = InMemorySpanExporter()
    tracer = RequestTracer(build_tracer_provider(TracingConfig(), exporter), "tiny")
    with live_server(tiny_config(), ServeOptions(), tracer=tracer) as server:
        # live_server returns once /ready is 200: the warm-up has been served.
        assert server.parts.async_engine.is_ready
        counted = _counted(server)
        assert counted, "no counter or histogram sample found"
        assert {key: v for key, v in counted.items() if v != 0} == {}
        tracer._provider.force_flush()
        assert exporter.get_finished_spans() == ()

        body = {"model": "tiny", "prompt": "hello", "max_tokens": 3, "ignore_eos": True}
        response = httpx.post(f"{server.base_url}/v1/completions", json=body, timeout=60)
        assert response.status_code == 200
        usage = response.json()["usage"]
        total = sum(
            v for (n, _), v in server.samples().items() if n == mn.REQUEST_SUCCESS.name + "_total"
        )
        assert total == 1
        assert server.value(mn.TIME_TO_FIRST_TOKEN.name + "_count") == 1
        assert server.value(mn.PROMPT_TOKENS.name + "_total") == usage["prompt_tokens"]
        assert server.value(mn.GENERATION_TOKENS.name + "_total") == usage["completion_tokens"]
        assert server.value(mn.E2E_REQUEST_LATENCY.name + "_count") == 1
        tracer._provider.force_flush()
        assert len(exporter.get_finished_spans()) == 1


def test_ready_waits_for_the_warm_up_and_the_start_up_phases_are_exported():
    """/ready is 503 warming_up until the warm-up forward has run; then the phases are on
    /metrics: model_load, warm_up (at least as long as the test held it) and ready."""
    import threading
    import time

    import uvicorn

    from engine.server.launch import build_engine_server
    from engine.server.uvicorn_server import listen_socket
    from tests.engine.server.conftest import wait_until

    parts = build_engine_server(tiny_config(), ServeOptions())
    release = threading.Event()
    # NOTE: a command the engine thread runs before anything else: the warm-up request's add
    # waits behind it, so the warm-up cannot finish until the test releases it
    parts.async_engine._loop.post(lambda: release.wait(30))
    sock = listen_socket("127.0.0.1", 0)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(parts.app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    started = time.time()
    thread.start()
    try:
        wait_until(lambda: _answers(f"{base}/live"), timeout_seconds=30, what="the server")
        held = time.monotonic()
        warming = httpx.get(f"{base}/ready", timeout=5)
        assert warming.status_code == 503 and warming.json() == {"status": "warming_up"}
        assert "warm_up" not in _phases(base) and "model_load" in _phases(base)
        time.sleep(max(0.0, 0.3 - (time.monotonic() - held)))
        release.set()
        wait_until(lambda: _answers(f"{base}/ready"), timeout_seconds=30, what="ready")
        phases = _phases(base)
        assert phases["warm_up"] >= 0.3
        assert 0 < phases["model_load"] < phases["ready"]
        assert phases["ready"] >= phases["model_load"] + phases["warm_up"]
        text = httpx.get(f"{base}/metrics", timeout=5).text
        (start_line,) = [
            line for line in text.splitlines() if line.startswith(mn.ENGINE_START_TIME.name + "{")
        ]
        assert float(start_line.split()[-1]) <= started  # the process started before this
    finally:
        release.set()
        server.should_exit = True
        thread.join(timeout=30)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def _phases(base: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{base}/metrics", timeout=5).text
    return {
        s.labels["phase"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == mn.STARTUP_PHASE_SECONDS.name
    }
