"""collectors.promql: canonical families read back from a Prometheus HTTP API.

Unit tests run against a fake API (httpx.MockTransport); the integration test runs a real
Prometheus (Debian's package) on loopback scraping two small vLLM-shaped exporters, and
checks that what the source stores is, sample for sample, what Prometheus holds.
"""

from __future__ import annotations

import contextlib
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
from urllib.parse import parse_qs

import httpx
import pytest
import uvicorn
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.openmetrics import exposition as openmetrics

from collectors.promql import (
    DOWN_ERROR,
    METADATA_MAX_AGE_SECONDS,
    PrometheusSource,
    PrometheusSourceError,
)
from collectors.store import Store
from tests.collectors.prometheus_server import PrometheusServer, running_prometheus

# -- a fake Prometheus HTTP API --------------------------------------------------------------

T0 = 1_700_000_000.0
TTFT = "vllm:time_to_first_token_seconds"
BOUNDS = ("0.1", "1.0", "+Inf")


def _series(name: str, points: list[tuple[float, float]], **labels: str) -> dict:
    return {"__name__": name, **labels}, points


def _fake_fleet() -> list[tuple[dict, list[tuple[float, float]]]]:
    """Two targets scraped every 10 s from T0 (b 5 s later): a TTFT histogram, a counter,
    a gauge with a staleness marker (NaN) at T0 + 20 on target a."""
    series = []
    for instance, offset in (("a:8000", 0.0), ("b:8000", 5.0)):
        times = [T0 + offset + 10 * k for k in range(4)]
        common = {"instance": instance, "job": "vllm", "model_name": "m", "engine": "0"}
        for le, per_scrape in zip(BOUNDS, (1, 3, 4), strict=True):
            counts = [(t, float(per_scrape * k)) for k, t in enumerate(times)]
            series.append(_series(f"{TTFT}_bucket", counts, le=le, **common))
        series.append(
            _series(f"{TTFT}_count", [(t, 4.0 * k) for k, t in enumerate(times)], **common)
        )
        series.append(_series(f"{TTFT}_sum", [(t, 0.5 * k) for k, t in enumerate(times)], **common))
        series.append(
            _series(
                "vllm:prompt_tokens_total", [(t, 100.0 * k) for k, t in enumerate(times)], **common
            )
        )
        running = [(t, float(k)) for k, t in enumerate(times)]
        if instance == "a:8000":
            running[2] = (running[2][0], math.nan)
        series.append(_series("vllm:num_requests_running", running, **common))
    return series


class FakePrometheus:
    """Answers /api/v1/query for range-vector selectors from a fixed list of series (any
    selector matches every data series; ``up``/``scrape_duration_seconds`` come from
    ``health``), with Prometheus 2.x's closed range [t - r, t]."""

    def __init__(self, series, health=(), metadata=None) -> None:
        self.series = series
        self.health = list(health)
        self.metadata = metadata
        self.queries: list[tuple[str, float]] = []
        self.metadata_requests = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/api/v1/metadata":
            self.metadata_requests += 1
            if self.metadata is None:
                return httpx.Response(404, text="404 page not found")
            return httpx.Response(200, json={"status": "success", "data": self.metadata})
        assert path == "/api/v1/query", path
        form = {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
        query, at = form["query"], float(form["time"])
        self.queries.append((query, at))
        selector, range_ms = re.fullmatch(r"(.*)\[(\d+)ms\]", query).groups()
        chosen = self.health if selector.startswith('{__name__=~"up|') else self.series
        result = []
        for labels, points in chosen:
            values = [[t, _format(v)] for t, v in points if at - int(range_ms) / 1000 <= t <= at]
            if values:
                result.append({"metric": labels, "values": values})
        return httpx.Response(
            200,
            json={"status": "success", "data": {"resultType": "matrix", "result": result}},
        )


def _format(value: float) -> str:
    return "NaN" if math.isnan(value) else repr(value)


def _source(handler, **kwargs) -> PrometheusSource:
    client = httpx.Client(transport=httpx.MockTransport(handler))
    return PrometheusSource("http://prometheus.test:9090", client=client, **kwargs)


def test_records_per_target_and_timestamp_with_canonical_families():
    fake = FakePrometheus(_fake_fleet())
    records = _source(fake).read(T0, T0 + 40)
    assert [(r.target, r.timestamp_seconds) for r in records] == sorted(
        [("a:8000", T0 + 10 * k) for k in range(4)]
        + [("b:8000", T0 + 5 + 10 * k) for k in range(4)],
        key=lambda pair: (pair[1], pair[0]),
    )
    last_a = next(r for r in records if r.target == "a:8000" and r.timestamp_seconds == T0 + 30)
    assert last_a.is_up and last_a.dialect == "vllm" and last_a.duration_seconds is None
    (ttft,) = last_a.histograms
    assert ttft.family == "ttft_seconds"
    assert dict(ttft.labels) == {"target": "a:8000", "job": "vllm", "model": "m", "engine": "0"}
    assert ttft.upper_bounds == (0.1, 1.0, math.inf)
    assert ttft.cumulative_counts == (3.0, 9.0, 12.0)
    assert (ttft.sum_value, ttft.count) == (1.5, 12.0)
    values = {s.family: s.value for s in last_a.samples}
    assert values == {"prompt_tokens_total": 300.0, "requests_running": 3.0}
    assert not last_a.raw


def test_staleness_markers_never_become_samples():
    records = _source(FakePrometheus(_fake_fleet())).read(T0, T0 + 40)
    stale = next(r for r in records if r.target == "a:8000" and r.timestamp_seconds == T0 + 20)
    assert "requests_running" not in {s.family for s in stale.samples}
    assert all(not math.isnan(s.value) for r in records for s in r.samples)


def test_a_scrape_made_only_of_staleness_markers_gives_no_record():
    series = [_series("vllm:num_requests_running", [(T0, 1.0), (T0 + 10, math.nan)], instance="a")]
    records = _source(FakePrometheus(series)).read(T0, T0 + 10)
    assert [r.timestamp_seconds for r in records] == [T0]


def test_up_and_scrape_duration_give_state_and_duration_and_down_records():
    series = [
        _series("vllm:num_requests_running", [(T0, 1.0), (T0 + 20, 2.0)], instance="a", job="j")
    ]
    health = [
        _series("up", [(T0, 1.0), (T0 + 10, 0.0), (T0 + 20, 1.0)], instance="a", job="j"),
        _series(
            "scrape_duration_seconds",
            [(T0, 0.25), (T0 + 10, 1.0), (T0 + 20, 0.5)],
            instance="a",
            job="j",
        ),
    ]
    records = _source(FakePrometheus(series, health)).read(T0, T0 + 20)
    assert [(r.timestamp_seconds, r.is_up, r.error, r.duration_seconds) for r in records] == [
        (T0, True, "", 0.25),
        (T0 + 10, False, DOWN_ERROR, 1.0),
        (T0 + 20, True, "", 0.5),
    ]
    assert records[1].samples == records[1].histograms == records[1].raw == ()


def test_long_reads_are_chunked_without_gaps_or_duplicates():
    points = [(T0 + k, float(k)) for k in range(0, 101)]  # one a second, on chunk edges too
    fake = FakePrometheus([_series("vllm:num_requests_running", points, instance="a")])
    records = _source(fake, chunk_seconds=10).read(T0, T0 + 100)
    assert [r.timestamp_seconds for r in records] == [t for t, _ in points]
    data_queries = [q for q in fake.queries if not q[0].startswith('{__name__=~"up|')]
    assert len(data_queries) == 10  # [T0, T0+10], then (T0+10k, T0+10(k+1)]


def test_a_read_keeps_both_ends_and_nothing_outside():
    points = [(T0 + k, float(k)) for k in range(10)]
    fake = FakePrometheus([_series("vllm:num_requests_running", points, instance="a")])
    records = _source(fake).read(T0 + 2, T0 + 5)
    assert [r.timestamp_seconds for r in records] == [T0 + 2, T0 + 3, T0 + 4, T0 + 5]


def test_escaped_colon_names_map_to_the_same_families():
    # prometheus_client 0.26 over OpenMetrics, scraped by Prometheus 2.x (engine-metrics §8.9)
    series = [
        _series("vllm_time_to_first_token_seconds_bucket", [(T0, 2.0)], instance="a", le="0.1"),
        _series("vllm_time_to_first_token_seconds_bucket", [(T0, 5.0)], instance="a", le="+Inf"),
        _series("vllm_time_to_first_token_seconds_count", [(T0, 5.0)], instance="a"),
        _series("vllm_time_to_first_token_seconds_sum", [(T0, 1.0)], instance="a"),
        _series("vllm_prompt_tokens_total", [(T0, 9.0)], instance="a"),
        _series("tailwatch_collector_target_up", [(T0, 1.0)], instance="a", target="x"),
    ]
    (record,) = _source(FakePrometheus(series)).read(T0, T0)
    assert [(h.family, h.cumulative_counts) for h in record.histograms] == [
        ("ttft_seconds", (2.0, 5.0))
    ]
    assert [(s.family, s.value) for s in record.samples] == [("prompt_tokens_total", 9.0)]
    assert [r.name for r in record.raw] == ["tailwatch_collector_target_up"]  # not a colon name


def test_metadata_is_fetched_again_only_for_a_new_name_or_when_old():
    now = [T0]
    series = [_series("my_requests_total", [(T0, 3.0)], instance="a")]
    metadata = {"my_requests": [{"type": "counter", "help": "", "unit": ""}]}
    fake = FakePrometheus(series, metadata=metadata)
    source = _source(fake, clock=lambda: now[0])
    for _ in range(3):
        source.read(T0, T0)
    assert fake.metadata_requests == 1  # every name read is described: reused
    fake.series.append(_series("my_other_total", [(T0, 1.0)], instance="a"))
    source.read(T0, T0)
    assert fake.metadata_requests == 2  # a name the cached metadata does not describe
    fake.metadata["my_other"] = [{"type": "counter", "help": "", "unit": ""}]
    source.read(T0, T0)
    source.read(T0, T0)
    assert fake.metadata_requests == 3  # once more (it lacked my_other), then cached
    now[0] += METADATA_MAX_AGE_SECONDS
    source.read(T0, T0)
    assert fake.metadata_requests == 4  # too old


def test_metadata_types_families_no_rule_knows():
    series = [
        _series("my_requests_total", [(T0, 3.0)], instance="a"),
        _series("my_latency_seconds_bucket", [(T0, 1.0)], instance="a", le="+Inf"),
        _series("my_latency_seconds_count", [(T0, 1.0)], instance="a"),
    ]
    metadata = {"my_requests": [{"type": "counter", "help": "", "unit": ""}]}
    (record,) = _source(FakePrometheus(series, metadata=metadata)).read(T0, T0)
    assert {(r.name, r.family_type) for r in record.raw} == {
        ("my_requests_total", "counter"),
        ("my_latency_seconds_bucket", "histogram"),
        ("my_latency_seconds_count", "histogram"),
    }


def test_the_bundled_engines_empty_tenant_label_is_restored():
    # Prometheus drops tenant="" (empty labels are not stored); without it the per-tenant
    # series would collide with the fleet-wide one.
    series = [
        _series("vllm:prompt_tokens_total", [(T0, 10.0)], instance="a", model_name="m"),
        _series("tailwatch:tenant_prompt_tokens_total", [(T0, 4.0)], instance="a", model_name="m"),
        _series(
            "tailwatch:tenant_prompt_tokens_total",
            [(T0, 6.0)],
            instance="a",
            model_name="m",
            tenant="t",
        ),
    ]
    (record,) = _source(FakePrometheus(series)).read(T0, T0)
    assert sorted((dict(s.labels).get("tenant", "(none)"), s.value) for s in record.samples) == [
        ("", 4.0),
        ("(none)", 10.0),
        ("t", 6.0),
    ]


def test_poll_reads_incrementally_and_stores_nothing_twice(tmp_path):
    fake = FakePrometheus(_fake_fleet())
    store = Store(f"sqlite:///{tmp_path / 'tw.db'}")
    source = _source(fake, lookback_seconds=3600, overlap_seconds=15)
    first = source.poll(store, now=T0 + 22)
    assert [(r.target, r.timestamp_seconds) for r in first] == [
        ("a:8000", T0), ("b:8000", T0 + 5), ("a:8000", T0 + 10), ("b:8000", T0 + 15), ("a:8000", T0 + 20),
    ]  # fmt: skip
    assert source.last_seen == {"a:8000": T0 + 20, "b:8000": T0 + 15}
    second = source.poll(store, now=T0 + 40)
    assert [(r.target, r.timestamp_seconds) for r in second] == [
        ("b:8000", T0 + 25), ("a:8000", T0 + 30), ("b:8000", T0 + 35),
    ]  # fmt: skip
    # the second poll started overlap_seconds before the oldest newest timestamp (T0 + 15)
    (data_query, at) = fake.queries[-2]
    assert at == T0 + 40 and data_query.endswith(f"[{40_001}ms]")  # kept: [T0, T0 + 40]
    assert source.poll(store, now=T0 + 40) == []  # everything again: nothing new
    assert [t for t, _, _ in store.scrapes("a:8000")] == [T0 + 10 * k for k in range(4)]
    window = store.histogram_window("ttft_seconds", {"model": "m"}, T0, T0 + 35)
    assert window.cumulative_counts == (6.0, 18.0, 24.0)  # 3 scrape intervals x 2 targets
    store.close()


# -- errors ----------------------------------------------------------------------------------


def _answer(status: int, **kwargs):
    return lambda request: httpx.Response(status, **kwargs)


def test_a_bad_selector_gives_prometheus_own_error_text():
    body = {
        "status": "error",
        "errorType": "bad_data",
        "error": 'invalid parameter "query": 1:12: parse error: unexpected character inside braces',
    }
    source = _source(_answer(400, json=body), match=["{__name__=~"])
    with pytest.raises(
        PrometheusSourceError, match=r"HTTP 400, bad_data\): invalid parameter .* parse error"
    ):
        source.read(T0, T0 + 10)


def test_an_unreachable_server_is_a_clear_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with (
        PrometheusSource(f"http://127.0.0.1:{port}") as source,
        pytest.raises(
            PrometheusSourceError, match=r"cannot reach Prometheus at http://127\.0\.0\.1"
        ),
    ):
        source.read(T0, T0 + 10)


def test_a_timeout_is_a_clear_error():
    def slow(request):
        raise httpx.ReadTimeout("timed out", request=request)

    with pytest.raises(PrometheusSourceError, match="did not answer within 30 s"):
        _source(slow).read(T0, T0 + 10)


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (
            httpx.Response(200, html="<html>Grafana</html>"),
            "did not answer like a Prometheus HTTP API",
        ),
        (httpx.Response(200, json={"hello": "world"}), "did not answer like a Prometheus HTTP API"),
        (
            httpx.Response(404, text="404 page not found"),
            r"HTTP 404 Not Found for query \(check the URL",
        ),
        (httpx.Response(502, text="bad gateway"), "HTTP 502 Bad Gateway"),
        (
            httpx.Response(
                200, json={"status": "success", "data": {"resultType": "vector", "result": []}}
            ),
            "returned 'vector', not a range vector",
        ),
        (
            httpx.Response(
                422, json={"status": "error", "errorType": "execution", "error": "too many samples"}
            ),
            r"HTTP 422, execution\): too many samples",
        ),
    ],
)
def test_a_non_prometheus_answer_is_a_clear_error(response, message):
    with pytest.raises(PrometheusSourceError, match=message):
        _source(lambda request: response).read(T0, T0 + 10)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"url": "localhost:9090"}, "expected http"),
        ({"url": "http://p:9090", "match": []}, "match: expected series selectors"),
        ({"url": "http://p:9090", "timeout": 0}, "timeout=0: must be > 0"),
    ],
)
def test_configuration_mistakes_are_clear_errors(kwargs, message):
    with pytest.raises(PrometheusSourceError, match=message):
        PrometheusSource(**kwargs)


# -- against a real Prometheus ---------------------------------------------------------------


class VllmShapedExporter:
    """A vLLM-shaped exporter whose counters move on every scrape; ``escaped`` serves
    prometheus_client 0.26's OpenMetrics (``vllm_`` on sample lines, §8.9), else text
    0.0.4. A second gauge series disappears after a few scrapes (a staleness marker)."""

    def __init__(self, escaped: bool) -> None:
        self.escaped = escaped
        self.registry = CollectorRegistry()
        names = ["model_name", "engine"]
        self.ttft = Histogram(
            TTFT, "TTFT.", names, buckets=(0.01, 0.1, 1.0), registry=self.registry
        )
        self.prompt = Counter("vllm:prompt_tokens", "Prompt tokens.", names, registry=self.registry)
        self.running = Gauge("vllm:num_requests_running", "Running.", names, registry=self.registry)
        self.scrapes = 0

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        self.scrapes += 1
        k = self.scrapes
        self.ttft.labels("m", "0").observe(0.004 * (k % 40))
        self.prompt.labels("m", "0").inc(7)
        self.running.labels("m", "0").set(k % 3)
        if k <= 4:
            self.running.labels("m", "1").set(k)
        elif k == 5:
            self.running.remove("m", "1")
        if self.escaped:
            body = openmetrics.generate_latest(self.registry)
            content_type = openmetrics.CONTENT_TYPE_LATEST
        else:
            body = generate_latest(self.registry)
            content_type = "text/plain; version=0.0.4; charset=utf-8"
        headers = [(b"content-type", content_type.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


@contextlib.contextmanager
def _serve(app) -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture(scope="module")
def scraped_by_prometheus(tmp_path_factory) -> Iterator[tuple[PrometheusServer, list[str]]]:
    """Prometheus scraping a text exporter and an escaped OpenMetrics one every second,
    until each holds at least 8 scrapes."""
    with (
        _serve(VllmShapedExporter(escaped=False)) as text_target,
        _serve(VllmShapedExporter(escaped=True)) as escaped_target,
        running_prometheus(
            tmp_path_factory.mktemp("prometheus"), [text_target, escaped_target]
        ) as prometheus,
    ):
        targets = [text_target, escaped_target]
        deadline = time.monotonic() + 120
        while True:
            result = prometheus.api("query", query="count_over_time(up[1h])")["result"]
            counts = {r["metric"]["instance"]: float(r["value"][1]) for r in result}
            if all(counts.get(t, 0) >= 8 for t in targets):
                break
            assert time.monotonic() < deadline, (
                f"too few scrapes {counts}:\n{prometheus.log_tail()}"
            )
            time.sleep(0.5)
        yield prometheus, targets


def test_stored_samples_equal_what_prometheus_holds(scraped_by_prometheus, tmp_path):
    prometheus, targets = scraped_by_prometheus
    end = time.time()
    start = end - 3600
    store = Store(f"sqlite:///{tmp_path / 'tw.db'}")
    with PrometheusSource(prometheus.url) as source:
        records = source.read(start, end)
        assert all(store.write_scrape(record) for record in records)
        assert not any(store.write_scrape(record) for record in source.read(start, end))

    for target in targets:
        escaped = target == targets[1]
        name = (lambda n: n.replace(":", "_")) if escaped else (lambda n: n)
        held = _by_time(
            prometheus.raw_samples(name(f"{TTFT}_bucket") + f'{{instance="{target}"}}', start, end)
        )
        assert held, f"Prometheus holds no TTFT of {target}"
        (snapshots,) = store.snapshots("ttft_seconds", {"target": target}, start, end).values()
        assert [s.timestamp_seconds for s in snapshots] == sorted(held)
        for snapshot in snapshots:
            by_le = held[snapshot.timestamp_seconds]
            assert snapshot.histogram.upper_bounds == tuple(sorted(by_le))
            assert snapshot.histogram.cumulative_counts == tuple(by_le[b] for b in sorted(by_le))
        for family, wire in (
            ("prompt_tokens_total", "vllm:prompt_tokens_total"),
            ("requests_running", "vllm:num_requests_running"),
        ):
            raw = prometheus.raw_samples(name(wire) + f'{{instance="{target}"}}', start, end)
            stored = store.samples(family, {"target": target}, start, end)
            assert {
                dict(k)["engine"]: [(s.timestamp_seconds, s.value) for s in v]
                for k, v in stored.items()
            } == {
                r["metric"]["engine"]: [(float(t), float(v)) for t, v in r["values"]] for r in raw
            }
        # the series that disappeared: stored while exposed, never as NaN; and Prometheus
        # did write its staleness marker (else an instant query would still find it)
        (gone,) = store.samples(
            "requests_running", {"target": target, "engine": "1"}, start, end
        ).values()
        assert gone and not any(math.isnan(s.value) for s in gone)
        after = prometheus.api(
            "query", query=name("vllm:num_requests_running") + f'{{instance="{target}",engine="1"}}'
        )
        assert after["result"] == []
        assert len(store.scrapes(target)) == len(held)
    store.close()


def test_windows_equal_prometheus_raw_differences(scraped_by_prometheus, tmp_path):
    prometheus, targets = scraped_by_prometheus
    end = time.time()
    store = Store(f"sqlite:///{tmp_path / 'tw.db'}")
    with PrometheusSource(prometheus.url) as source:
        for record in source.read(end - 3600, end):
            store.write_scrape(record)
    for target, selector in zip(
        targets, (f"{TTFT}_bucket", TTFT.replace(":", "_") + "_bucket"), strict=True
    ):
        held = _by_time(
            prometheus.raw_samples(selector + f'{{instance="{target}"}}', end - 3600, end)
        )
        times = sorted(held)
        t0, t1 = times[1], times[-2]  # on scrapes: the store's windows are then exact
        window = store.histogram_window("ttft_seconds", {"target": target}, t0, t1)
        expected = tuple(held[t1][b] - held[t0][b] for b in sorted(held[t1]))
        assert window.cumulative_counts == expected
        prompt = prometheus.raw_samples(
            f'{{__name__=~"vllm[:_]prompt_tokens_total",instance="{target}"}}', t0, t1
        )
        (series,) = prompt
        increase = float(series["values"][-1][1]) - float(series["values"][0][1])
        assert store.counter_window("prompt_tokens_total", {"target": target}, t0, t1) == increase
        assert increase == 7 * (len(series["values"]) - 1)  # the exporter adds 7 a scrape
    store.close()


def test_a_real_prometheus_rejects_a_bad_selector_with_its_own_words(scraped_by_prometheus):
    prometheus, _ = scraped_by_prometheus
    with (
        PrometheusSource(prometheus.url, match=['{__name__=~"vllm:.*"']) as source,
        pytest.raises(PrometheusSourceError, match=r"HTTP 400, bad_data\).*parse error"),
    ):
        source.read(time.time() - 60, time.time())


def _by_time(series: list[dict]) -> dict[float, dict[float, float]]:
    """Bucket samples of one target: timestamp → {le: count}."""
    held: dict[float, dict[float, float]] = {}
    for item in series:
        le = float(item["metric"]["le"])
        for t, v in item["values"]:
            held.setdefault(float(t), {})[le] = float(v)
    return held


def test_the_daemon_reads_a_configured_prometheus_source_into_the_store(
    scraped_by_prometheus, tmp_path
):
    """``collector.prometheus_sources`` in tailwatch.yaml: ``tailwatch collect`` with no
    scrape targets polls Prometheus and stores every scrape it holds of each target."""
    prometheus, targets = scraped_by_prometheus
    db = tmp_path / "tw.db"
    config = tmp_path / "tailwatch.yaml"
    config.write_text(
        f"database_url: sqlite:///{db}\n"
        "collector:\n"
        "  listen: 127.0.0.1:0\n"
        "  scrape_interval_seconds: 1\n"
        "  prometheus_sources:\n"
        f"    - url: {prometheus.url}\n"
        "      labels: {cluster: test}\n"
    )
    command = [sys.executable, "-m", "tailwatch.cli", "collect", "--config", str(config)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("TAILWATCH_DB_URL", None)
    daemon = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        seen = []
        for _ in range(20):
            seen.append(daemon.stderr.readline())
            if "OTLP traces at" in seen[-1] or not seen[-1]:
                break
        assert f"collecting Prometheus at {prometheus.url} every 1 s" in seen[-1], "".join(seen)
        store = Store(f"sqlite:///{db}")
        deadline = time.monotonic() + 60
        while not all(len(store.scrapes(t)) >= 8 for t in targets):
            assert daemon.poll() is None, "".join(seen) + daemon.stderr.read()
            assert time.monotonic() < deadline, {t: len(store.scrapes(t)) for t in targets}
            time.sleep(0.5)
        (series,) = store.series("prompt_tokens_total", {"target": targets[0], "engine": "0"})
        assert dict(series.labels)["cluster"] == "test"  # the source's labels fill in
        store.close()
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            assert daemon.wait(timeout=60) == 0
        finally:
            if daemon.poll() is None:
                daemon.kill()
