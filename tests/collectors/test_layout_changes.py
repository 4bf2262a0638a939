"""A bucket-layout change is reported at the scrape that shows it: a log line naming the
target, the series and both layouts, ``tailwatch_collector_layout_changes_total{target}``,
and the target's status (``Collector.target_statuses``, the daemon's ``GET /targets``)."""

from __future__ import annotations

import asyncio
import logging

from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors import collector_metrics as cm
from collectors.canonical import CanonicalHistogram
from collectors.collector import Collector
from collectors.layout_changes import LayoutTracker, format_edges
from collectors.scrape import Scraper, Target
from collectors.store import ScrapeRecord, Store
from slo.window import format_utc
from tailwatch.collect_daemon import daemon_app
from tests.collectors.test_scrape import serve_app

INF = float("inf")


def histogram(bounds: tuple[float, ...], family: str = "ttft_seconds", model: str = "m"):
    counts = tuple(float(i) for i in range(1, len(bounds) + 1))
    labels = (("model", model), ("target", "a"))
    return CanonicalHistogram(family, labels, bounds, counts, 1.0, counts[-1])


def scrape(timestamp: float, *histograms: CanonicalHistogram, is_up: bool = True):
    return ScrapeRecord("a", timestamp, histograms=histograms, is_up=is_up)


def test_a_changed_layout_is_seen_once_and_a_series_seen_first_is_not_a_change():
    tracker = LayoutTracker()
    old, new = (0.1, 0.5, INF), (0.1, 0.25, 0.5, INF)
    assert tracker.observe(scrape(1000.0, histogram(old))) == []  # first seen
    assert tracker.observe(scrape(1005.0, histogram(old), histogram(new, model="n"))) == []
    (change,) = tracker.observe(scrape(1010.0, histogram(new), histogram(new, model="n")))
    assert (change.target, change.timestamp_seconds, change.family) == ("a", 1010.0, "ttft_seconds")
    assert (change.old_upper_bounds, change.new_upper_bounds) == (old, new)
    assert change.describe() == (
        'bucket layout of ttft_seconds{model="m"} on a changed at 1970-01-01T00:16:50.000Z: '
        "le [0.1, 0.5, +Inf] -> [0.1, 0.25, 0.5, +Inf] (added 0.25)"
    )
    assert tracker.observe(scrape(1015.0, histogram(new))) == []  # the new layout is the norm


def test_a_series_absent_for_a_while_is_compared_with_its_last_layout():
    # prometheus_client shows a labelled histogram only after its first observation: a
    # restarted replica exposes the series again, with its new buckets, only scrapes later
    tracker = LayoutTracker()
    tracker.observe(scrape(1000.0, histogram((1.0, INF))))
    assert tracker.observe(scrape(1005.0)) == []  # restarted: not exposed yet
    assert tracker.observe(scrape(1010.0, histogram((1.0, INF)), is_up=False)) == []  # down
    (change,) = tracker.observe(scrape(1015.0, histogram((2.0, INF))))
    assert change.describe().endswith("le [1, +Inf] -> [2, +Inf] (added 2; removed 1)")
    tracker.forget("a")
    assert tracker.observe(scrape(1020.0, histogram((3.0, INF)))) == []  # forgotten


bounds = st.lists(
    st.floats(min_value=-1e300, max_value=1e300, allow_nan=False), min_size=0, max_size=30
).map(lambda values: (*sorted(set(values)), INF))


@settings(max_examples=100, deadline=None)
@given(first=bounds, second=bounds)
def test_a_change_is_reported_exactly_when_the_edges_differ(first, second):
    tracker = LayoutTracker()
    tracker.observe(scrape(1.0, histogram(first)))
    changes = tracker.observe(scrape(2.0, histogram(second)))
    assert len(changes) == (first != second)
    if changes:
        line = changes[0].describe()
        assert line.startswith('bucket layout of ttft_seconds{model="m"} on a changed at ')
        assert format_edges(first) in line and format_edges(second) in line


def test_long_layouts_are_shown_short_and_times_as_utc():
    vllm_ttft = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, INF)
    assert format_edges(vllm_ttft) == "[0.001, 0.005, 0.01, …, 0.75, 1, +Inf] (13 edges)"
    assert format_utc(1796150000.0) == "2026-12-01T18:33:20.000Z"
    assert format_utc(float("inf")) == "inf (Unix seconds)"


def exposition(bounds: list[str]) -> bytes:
    lines = ["# TYPE vllm:time_to_first_token_seconds histogram"]
    for index, le in enumerate(bounds, start=1):
        lines.append(f'vllm:time_to_first_token_seconds_bucket{{le="{le}",model_name="m"}} {index}')
    lines.append(f'vllm:time_to_first_token_seconds_count{{model_name="m"}} {len(bounds)}')
    lines.append('vllm:time_to_first_token_seconds_sum{model_name="m"} 1.5')
    return ("\n".join(lines) + "\n").encode()


def test_the_collector_reports_a_layout_change_when_it_scrapes_it(tmp_path, caplog):
    served = {"body": exposition(["0.1", "0.5", "+Inf"])}

    async def app(scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        body = served["body"]
        headers = [(b"content-type", b"text/plain; version=0.0.4")]
        headers.append((b"content-length", b"%d" % len(body)))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    store = Store(f"sqlite:///{tmp_path / 'tw.db'}")
    clock = {"now": 1796150000.0}

    async def rounds(collector: Collector, count: int) -> None:
        async with Scraper(timeout_seconds=5, clock=lambda: clock["now"]) as scraper:
            collector.scraper = scraper
            for _ in range(count):
                await collector.run_once()
                clock["now"] += 5.0

    with serve_app(app) as base_url:
        collector = Collector([Target("replica-a", base_url + "/metrics")], store, Scraper())
        assert collector.registry.get_sample_value(
            cm.LAYOUT_CHANGES + "_total", {"target": "replica-a"}
        ) == 0  # fmt: skip
        asyncio.run(rounds(collector, 2))
        served["body"] = exposition(["0.1", "0.25", "0.5", "+Inf"])  # restarted with new buckets
        with caplog.at_level(logging.WARNING, logger="tailwatch.collector"):
            asyncio.run(rounds(collector, 2))
    store.close()

    lines = [r.getMessage() for r in caplog.records if "bucket layout" in r.getMessage()]
    assert lines == [
        'bucket layout of ttft_seconds{model="m"} on replica-a changed at '
        "2026-12-01T18:33:30.000Z: le [0.1, 0.5, +Inf] -> [0.1, 0.25, 0.5, +Inf] (added 0.25)"
    ]
    value = collector.registry.get_sample_value
    assert value(cm.LAYOUT_CHANGES + "_total", {"target": "replica-a"}) == 1
    (status,) = collector.target_statuses()
    assert status.num_layout_changes == 1
    assert status.last_layout_change is not None
    assert status.last_layout_change.timestamp_seconds == 1796150010.0

    app_under_test = daemon_app(collector.registry, lambda spans: None, collector.target_statuses)
    with TestClient(app_under_test) as client:
        (shown,) = client.get("/targets").json()["targets"]
    assert (shown["target"], shown["health"], shown["num_scrapes"]) == ("replica-a", "up", 4)
    assert shown["last_layout_change"] == {
        "timestamp_seconds": 1796150010.0,
        "time": "2026-12-01T18:33:30.000Z",
        "family": "ttft_seconds",
        "labels": {"model": "m", "target": "replica-a"},
        "old_le": ["0.1", "0.5", "+Inf"],
        "new_le": ["0.1", "0.25", "0.5", "+Inf"],
    }
