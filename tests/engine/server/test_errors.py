"""Failures that are not the caller's: a 500 in the same shape, saying nothing internal."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from engine.async_engine import AsyncEngine
from engine.llm_engine import LLMEngine
from engine.server.app import build_app
from engine.tracing import RequestTracer
from tests.engine.server.conftest import tiny_config


class ExplodingMetrics:
    """A metrics double whose scrape fails; it records what the middleware counted."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.handlers: list[str] = []

    def observe_http_response(self, status_code: int, handler: str) -> None:
        self.statuses.append(status_code)
        self.handlers.append(handler)

    def render(self, accept_header: str | None) -> tuple[bytes, str]:
        raise RuntimeError("secret internals: /etc/passwd")


@pytest.fixture(scope="module")
def async_engine() -> AsyncEngine:
    # never started: these tests need no engine loop (the lifespan is not run)
    return AsyncEngine(LLMEngine(tiny_config()))


def _client(async_engine: AsyncEngine, metrics: ExplodingMetrics) -> TestClient:
    app = build_app(
        async_engine,
        served_model_name="tiny",
        metrics=metrics,  # type: ignore[arg-type]
        tracer=RequestTracer(None, "tiny"),
        admin_token=None,
    )
    return TestClient(app, raise_server_exceptions=False)


def test_an_unexpected_exception_is_a_500_that_leaks_nothing_and_is_counted(async_engine):
    metrics = ExplodingMetrics()
    client = _client(async_engine, metrics)

    def boom() -> None:
        raise RuntimeError("secret internals: /etc/passwd")

    client.app.add_api_route("/boom", boom)  # type: ignore[attr-defined]
    response = client.get("/boom")
    assert response.status_code == 500
    assert response.json() == {
        "error": {
            "message": "internal server error",
            "type": "server_error",
            "param": None,
            "code": "internal_error",
        }
    }
    assert "secret" not in response.text
    assert metrics.statuses == [500]
    assert metrics.handlers == ["/boom"]  # the route that raised, counted where it failed


def test_a_scrape_that_cannot_render_is_a_503_never_a_500(async_engine):
    metrics = ExplodingMetrics()
    response = _client(async_engine, metrics).get("/metrics")
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "metrics_unavailable"
    assert "secret" not in response.text
    assert metrics.statuses == [503]
    assert metrics.handlers == ["/metrics"]


def test_a_dead_engine_loop_fails_requests_health_and_readiness(async_engine):
    metrics = ExplodingMetrics()
    client = _client(async_engine, metrics)
    assert client.get("/ready").json() == {"status": "warming_up"}
    async_engine.loop_error = RuntimeError("CUDA error: device-side assert (secret)")
    try:
        response = client.post("/v1/completions", json={"prompt": "Hi", "max_tokens": 1})
        # a dead engine is not the caller's fault: 503, so a balancer tries another replica
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "engine_dead"
        assert "secret" not in response.text
        assert client.get("/health").status_code == 503
        ready = client.get("/ready")
        assert ready.status_code == 503 and ready.json() == {"status": "failed"}
        live = client.get("/live")  # a liveness probe restarts a dead replica
        assert live.status_code == 503 and live.json() == {"status": "dead"}
    finally:
        async_engine.loop_error = None
    assert metrics.statuses == [503, 503, 503, 503, 503]
    assert metrics.handlers == ["/ready", "/v1/completions", "/health", "/ready", "/live"]
