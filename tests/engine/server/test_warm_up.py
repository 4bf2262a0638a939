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
