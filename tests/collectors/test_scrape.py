"""Scraping real servers on loopback: the bundled engine, and a small app that misbehaves
in every way a target can (garbage, 500, huge bodies, slow and trickling answers)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest
import uvicorn

from collectors.scrape import ACCEPT_HEADER, Scraper, Target, accept_header
from collectors.store import Store

HEALTHY_BODY = (
    b"# HELP vllm:num_requests_running Requests running.\n"
    b"# TYPE vllm:num_requests_running gauge\n"
    b'vllm:num_requests_running{model_name="m"} 3.0\n'
)
MAX_BODY_BYTES = 64 * 1024
#: The timeout /slow and /trickle must run into.
TIMEOUT_SECONDS = 0.5
#: The timeout of every other scrape: a busy 2-core machine may take a second to answer /ok,
#: which must not read as a timeout.
GENEROUS_TIMEOUT_SECONDS = 30.0
TIMING_OUT = ("/slow", "/trickle")


async def faulty_app(scope, receive, send) -> None:
    """A target per path: /ok, /garbage, /garbage-om, /error, /huge (Content-Length), /huge-stream (no
    Content-Length), /slow (answers after the timeout), /trickle (a byte at a time)."""
    if scope["type"] != "http":
        return
    path = scope["path"]
    headers = [(b"content-type", b"text/plain; version=0.0.4; charset=utf-8")]
    if path == "/ok":
        await _answer(send, 200, headers, HEALTHY_BODY)
    elif path == "/garbage":
        await _answer(send, 200, headers, b"<html><body>metrics moved</body></html>\n")
    elif path == "/garbage-om":  # claims OpenMetrics, lacks the mandatory "# EOF"
        om = [(b"content-type", b"application/openmetrics-text; version=1.0.0; charset=utf-8")]
        await _answer(send, 200, om, HEALTHY_BODY)
    elif path == "/error":
        await _answer(send, 500, headers, b"boom")
    elif path == "/huge":
        await _answer(send, 200, headers, b"# padding\n" * (MAX_BODY_BYTES // 5))
    elif path == "/huge-stream":
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for _ in range(40):
            chunk = b"# padding\n" * 1000
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    elif path == "/slow":
        await asyncio.sleep(TIMEOUT_SECONDS * 6)
        await _answer(send, 200, headers, HEALTHY_BODY)
    elif path == "/trickle":
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        with contextlib.suppress(Exception):
            for _ in range(30):  # each read is quick; the whole takes 3 s
                await send({"type": "http.response.body", "body": b"#", "more_body": True})
                await asyncio.sleep(0.1)
            await send({"type": "http.response.body", "body": b"\n"})
    else:
        await _answer(send, 404, headers, b"not found")


async def _answer(send, status: int, headers, body: bytes) -> None:
    length = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + length})
    await send({"type": "http.response.body", "body": body})


@contextlib.contextmanager
def serve_app(app) -> Iterator[str]:
    """``app`` under uvicorn in a thread on a free loopback port; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    base_url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(500):
            with contextlib.suppress(httpx.TransportError):
                httpx.get(f"{base_url}/ok", timeout=1)
                break
        yield base_url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def refused_url() -> str:
    """A loopback URL nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/metrics"


@pytest.fixture(scope="module")
def faulty_url() -> Iterator[str]:
    with serve_app(faulty_app) as url:
        yield url


def scrape(
    targets: list[Target], accept: str = ACCEPT_HEADER, timeout: float = GENEROUS_TIMEOUT_SECONDS
):
    async def go():
        async with Scraper(timeout, MAX_BODY_BYTES, clock=lambda: 1000.0, accept=accept) as scraper:
            return await scraper.scrape_all(targets)

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/garbage", "unparseable Prometheus text exposition: invalid metric name"),
        ("/garbage-om", "unparseable OpenMetrics exposition: "),
        ("/error", "HTTP 500 Internal Server Error"),
        ("/huge", f"body exceeds max_body_bytes={MAX_BODY_BYTES} (Content-Length"),
        ("/huge-stream", f"body exceeds max_body_bytes={MAX_BODY_BYTES} (stopped after"),
        ("/slow", f"timed out after {TIMEOUT_SECONDS:g} s"),
        ("/trickle", f"timed out after {TIMEOUT_SECONDS:g} s"),
        ("/missing", "HTTP 404 Not Found"),
    ],
)
def test_a_faulty_target_is_down_with_a_specific_error_and_a_healthy_one_is_up(
    faulty_url, path, error
):
    if path in TIMING_OUT:
        # NOTE: the healthy target is scraped beside the others only: under a short timeout a
        # busy machine could time it out too. Its error says the timeout cut the scrape (/slow
        # answers, validly, after six timeouts), and no scrape times out early.
        (bad,) = scrape([Target("bad", faulty_url + path)], timeout=TIMEOUT_SECONDS)
        assert bad.duration_seconds is not None
        assert bad.duration_seconds >= TIMEOUT_SECONDS * 0.9
    else:
        bad, good = scrape([Target("bad", faulty_url + path), Target("good", faulty_url + "/ok")])
        assert good.is_up and good.error == ""
        assert [(s.family, s.value) for s in good.samples] == [("requests_running", 3.0)]
    assert (bad.target, bad.is_up) == ("bad", False)
    assert bad.error.startswith(error), bad.error
    assert bad.samples == bad.histograms == bad.raw == ()
    assert bad.timestamp_seconds == 1000.0


def test_connection_refused_is_down_and_never_raises():
    (record,) = scrape([Target("gone", refused_url())])
    assert not record.is_up
    assert record.error.startswith("connection failed"), record.error


def test_target_labels_fill_missing_labels(faulty_url):
    (record,) = scrape([Target("a", faulty_url + "/ok", {"replica": "a", "model": "other"})])
    (sample,) = record.samples
    # the source's own model label wins; labels it lacks come from the target
    assert dict(sample.labels) == {"target": "a", "model": "m", "replica": "a"}


def test_down_and_up_records_are_stored_side_by_side(faulty_url, tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'tw.db'}")
    for record in scrape([Target("bad", faulty_url + "/error"), Target("ok", faulty_url + "/ok")]):
        assert store.write_scrape(record)
    assert store.samples("requests_running", {"target": "ok"}, 0, 2000)
    assert store.scrapes("bad") == [(1000.0, False, "HTTP 500 Internal Server Error")]


# -- the bundled engine ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine_url() -> Iterator[str]:
    import torch
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from engine.server.launch import ServeOptions
    from engine.tracing import RequestTracer, TracingConfig, build_tracer_provider
    from tests.engine.server.conftest import live_server, tiny_config

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    provider = build_tracer_provider(TracingConfig(sampling_ratio=1.0), InMemorySpanExporter())
    try:
        with live_server(
            tiny_config(), ServeOptions(), tracer=RequestTracer(provider, "tiny")
        ) as live:
            with live.http() as client:
                for index in range(4):
                    response = client.post(
                        "/v1/completions",
                        json={"model": "tiny", "prompt": f"hello {index}", "max_tokens": 4},
                    )
                    assert response.status_code == 200, response.text
            yield live.base_url
    finally:
        provider.shutdown()
        torch.set_num_threads(previous)


def test_the_bundled_engine_negotiates_openmetrics_with_exemplars(engine_url):
    response = httpx.get(engine_url + "/metrics", headers={"Accept": ACCEPT_HEADER})
    assert response.headers["content-type"].startswith("application/openmetrics-text")

    (record,) = scrape([Target("replica-a", engine_url + "/metrics", {"replica": "a"})])
    assert record.is_up, record.error
    assert record.dialect == "tailwatch,vllm"
    families = {h.family for h in record.histograms}
    assert {"ttft_seconds", "itl_seconds", "e2e_seconds", "queue_seconds"} <= families
    (ttft,) = [
        h
        for h in record.histograms
        if h.family == "ttft_seconds" and "tenant" not in dict(h.labels)
    ]
    assert ttft.count >= 4  # our four requests (and any warm-up the server made)
    assert dict(ttft.labels)["replica"] == "a" and dict(ttft.labels)["target"] == "replica-a"
    assert ttft.exemplars, "OpenMetrics exemplars should arrive"
    assert all(len(dict(e.labels)["trace_id"]) == 32 for e in ttft.exemplars)
    assert not [r for r in record.raw if r.name.startswith("vllm_")], "escaped colons leaked"


def test_text_first_scrape_protocols_get_the_same_families_without_exemplars(engine_url):
    """``scrape_protocols: [PrometheusText0.0.4]``: the engine answers text 0.0.4, and the
    same canonical series are stored (escaped colons re-attached), only without exemplars."""
    target = [Target("replica-a", engine_url + "/metrics")]
    (text,) = scrape(target, accept=accept_header(["PrometheusText0.0.4"]))
    (openmetrics,) = scrape(target)
    assert text.is_up and openmetrics.is_up, (text.error, openmetrics.error)
    assert text.dialect == openmetrics.dialect == "tailwatch,vllm"

    def identities(record):
        return {(h.family, h.labels) for h in record.histograms}, {
            (s.family, s.labels) for s in record.samples
        }

    assert identities(text) == identities(openmetrics)
    assert not any(h.exemplars for h in text.histograms)
    assert any(h.exemplars for h in openmetrics.histograms)
    assert not [r for r in text.raw if r.name.startswith("vllm_")], "escaped colons leaked"


def test_an_unexpected_error_on_one_target_is_a_down_record_not_a_crash(faulty_url, monkeypatch):
    import collectors.scrape

    real = collectors.scrape.normalise

    def breaks_on_bad(families, target, default_labels=None):
        if target == "bad":
            raise KeyError("a rule bug")
        return real(families, target=target, default_labels=default_labels)

    monkeypatch.setattr(collectors.scrape, "normalise", breaks_on_bad)
    bad, good = scrape([Target("bad", faulty_url + "/ok"), Target("good", faulty_url + "/ok")])
    assert not bad.is_up and bad.error == "internal error: KeyError: 'a rule bug'"
    assert good.is_up
