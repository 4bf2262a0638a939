"""The collection loop against real scrapes on loopback and a real SQLite store, with the
database failing on purpose: nothing from a healthy target is lost, and overflow is counted."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy.exc import OperationalError

from collectors import collector_metrics as cm
from collectors.collector import Collector
from collectors.scrape import Scraper, Target
from collectors.store import DuplicateSeriesError, ScrapeRecord, Store
from tests.collectors.test_scrape import faulty_app, serve_app


class FlakyStore:
    """A real store whose first ``num_failures`` batch writes raise OperationalError (before
    writing, or, with ``fail_after_write``, after the batch committed: a lost reply)."""

    def __init__(self, store: Store, num_failures: int, fail_after_write: bool = False):
        self.store = store
        self.num_failures = num_failures
        self.fail_after_write = fail_after_write
        self.batches: list[int] = []  # the size of each batch written

    def write_scrapes(self, records: list[ScrapeRecord]) -> list[bool]:
        self.batches.append(len(records))
        failing = self.num_failures > 0
        self.num_failures -= 1
        if failing and not self.fail_after_write:
            raise OperationalError("INSERT", {}, Exception("database is unavailable"))
        written = self.store.write_scrapes(records)
        if failing:
            raise OperationalError("COMMIT", {}, Exception("connection lost"))
        return written


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve_app(faulty_app) as url:
        yield url


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'tw.db'}")


def cycles(collector: Collector, num_cycles: int) -> None:
    """Run ``num_cycles`` cycles; the scrape clock reads 1000, 1005, 1010, ... per cycle."""

    # NOTE: an httpx.AsyncClient belongs to one event loop, so each asyncio.run gets its own.
    async def go():
        now = 0.0
        async with Scraper(timeout_seconds=2, clock=lambda: now) as scraper:
            collector.scraper = scraper
            for _ in range(num_cycles):
                now = 1000.0 + 5.0 * collector.num_cycles
                await collector.run_once()

    asyncio.run(go())


def make_collector(base_url, store, **kwargs) -> Collector:
    scraper = Scraper(timeout_seconds=2)  # replaced in each cycles() call
    targets = [Target("ok", base_url + "/ok"), Target("bad", base_url + "/error")]
    return Collector(targets, store, scraper, **kwargs)


def num_readings(store: Store, target: str) -> int:
    """How many requests_running readings of ``target`` are stored (its one series)."""
    (readings,) = store.samples("requests_running", {"target": target}, 0, 2000).values()
    return len(readings)


def value(collector: Collector, name: str, **labels: str) -> float | None:
    return collector.registry.get_sample_value(name, labels)


def test_scrapes_are_buffered_while_the_database_fails_and_none_is_lost(base_url, store):
    flaky = FlakyStore(store, num_failures=3)
    collector = make_collector(base_url, flaky)

    cycles(collector, 3)
    assert collector.num_buffered == 6 and store.scrapes("ok") == []
    assert value(collector, cm.BUFFERED_SCRAPES) == 6
    assert value(collector, cm.WRITE_ERRORS + "_total") == 3

    cycles(collector, 1)
    assert collector.num_buffered == 0
    assert [t for t, _, _ in store.scrapes("ok")] == [1000.0, 1005.0, 1010.0, 1015.0]
    assert [(up, err) for _, up, err in store.scrapes("bad")] == [
        (False, "HTTP 500 Internal Server Error")
    ] * 4
    assert num_readings(store, "ok") == 4
    assert value(collector, cm.SAMPLES_INGESTED + "_total", target="ok") == 4
    assert value(collector, cm.SCRAPE_ERRORS + "_total", target="bad") == 4
    assert value(collector, cm.SCRAPE_ERRORS + "_total", target="ok") == 0
    assert value(collector, cm.TARGET_UP, target="ok") == 1
    assert value(collector, cm.TARGET_UP, target="bad") == 0
    assert value(collector, cm.BUFFERED_SCRAPES) == 0
    assert value(collector, cm.DROPPED_SCRAPES + "_total", reason=cm.DROPPED_BUFFER_FULL) == 0
    # one observation per write transaction: three failed batches, then one of all eight
    assert value(collector, cm.WRITE_LATENCY_SECONDS + "_count") == 3 + 1
    assert flaky.batches == [2, 4, 6, 8]
    assert collector.last_errors == {"ok": "", "bad": "HTTP 500 Internal Server Error"}


def test_scrapes_buffered_when_the_collector_stops_are_written_by_the_next_start(
    base_url, store, tmp_path, caplog
):
    saved = tmp_path / "buffer.pickle"
    first = make_collector(base_url, FlakyStore(store, num_failures=10))
    cycles(first, 2)  # the database is down throughout
    assert first.num_buffered == 4 and store.scrapes("ok") == []
    with caplog.at_level(logging.WARNING, logger="tailwatch.collector"):
        assert first.save_buffer(saved) == 4
    assert "4 buffered scrape(s) not yet in the store saved to" in caplog.text

    restarted = make_collector(base_url, store)
    restarted.num_cycles = 2  # the scrape clock goes on: 1010
    assert restarted.load_buffer(saved) == 4 and not saved.exists()
    assert value(restarted, cm.BUFFERED_SCRAPES) == 4
    cycles(restarted, 1)
    assert [t for t, _, _ in store.scrapes("ok")] == [1000.0, 1005.0, 1010.0]
    assert num_readings(store, "ok") == 3
    assert restarted.num_buffered == 0
    assert restarted.save_buffer(saved) == 0 and not saved.exists()  # nothing left to save


def test_an_unreadable_saved_buffer_is_moved_aside_not_fatal(base_url, store, tmp_path, caplog):
    saved = tmp_path / "buffer.pickle"
    saved.write_bytes(b"not a pickle")
    collector = make_collector(base_url, store)
    with caplog.at_level(logging.ERROR, logger="tailwatch.collector"):
        assert collector.load_buffer(saved) == 0
    assert "cannot read saved scrapes" in caplog.text
    assert not saved.exists() and (tmp_path / "buffer.pickle.unreadable").exists()
    assert collector.load_buffer(tmp_path / "absent.pickle") == 0


def test_a_write_retried_after_a_lost_reply_is_stored_once(base_url, store):
    flaky = FlakyStore(store, num_failures=1, fail_after_write=True)
    collector = make_collector(base_url, flaky)
    cycles(collector, 2)
    assert collector.num_buffered == 0
    assert [t for t, _, _ in store.scrapes("ok")] == [1000.0, 1005.0]
    assert num_readings(store, "ok") == 2
    # the first scrape's retry found it stored (its reply was lost): counted once
    assert value(collector, cm.SAMPLES_INGESTED + "_total", target="ok") == 2


def test_a_full_buffer_drops_its_oldest_scrape_with_a_log_line(base_url, store, caplog):
    flaky = FlakyStore(store, num_failures=3)
    collector = make_collector(base_url, flaky, max_buffered_scrapes=3)
    with caplog.at_level(logging.WARNING, logger="tailwatch.collector"):
        cycles(collector, 3)
    assert collector.num_buffered == 3
    assert value(collector, cm.DROPPED_SCRAPES + "_total", reason=cm.DROPPED_BUFFER_FULL) == 3
    drops = [r.getMessage() for r in caplog.records if "buffer full" in r.getMessage()]
    assert drops == [
        "write buffer full (3 scrapes): dropped the oldest, ok at 1000.000",
        "write buffer full (3 scrapes): dropped the oldest, bad at 1000.000",
        "write buffer full (3 scrapes): dropped the oldest, ok at 1005.000",
    ]
    cycles(collector, 1)  # the database is back: the 3 kept and the 2 new are written
    assert [t for t, _, _ in store.scrapes("ok")] == [1010.0, 1015.0]
    assert [t for t, _, _ in store.scrapes("bad")] == [1005.0, 1010.0, 1015.0]


def test_a_backlog_drains_in_batches_oldest_first_once_the_database_is_back(base_url, store):
    class RecordingStore(FlakyStore):
        def __init__(self, *args) -> None:
            super().__init__(*args)
            self.written: list[list[tuple[float, str]]] = []

        def write_scrapes(self, records: list[ScrapeRecord]) -> list[bool]:
            written = super().write_scrapes(records)
            self.written.append([(r.timestamp_seconds, r.target) for r in records])
            return written

    recording = RecordingStore(store, 3)
    collector = make_collector(base_url, recording)
    collector.write_batch_size = 2
    cycles(collector, 3)  # the database is down: 6 scrapes buffered, one attempt a cycle
    assert collector.num_buffered == 6 and recording.batches == [2, 2, 2]
    cycles(collector, 1)  # back: the 6 and the 2 new, in 4 batches of 2, oldest first
    assert collector.num_buffered == 0
    assert recording.written == [
        [(1000.0 + 5 * k, "ok"), (1000.0 + 5 * k, "bad")] for k in range(4)
    ]
    assert [t for t, _, _ in store.scrapes("ok")] == [1000.0 + 5 * k for k in range(4)]
    assert value(collector, cm.DROPPED_SCRAPES + "_total", reason=cm.DROPPED_BUFFER_FULL) == 0
    assert value(collector, cm.WRITE_DELAY_SECONDS + "_count") == 8  # one per stored scrape


def test_a_scrape_the_store_refuses_is_dropped_and_counted(base_url, store):
    class Refusing:
        def __init__(self) -> None:
            self.batches: list[list[str]] = []

        def write_scrapes(self, records: list[ScrapeRecord]) -> list[bool]:
            self.batches.append([r.target for r in records])
            if any(record.target == "ok" and record.timestamp_seconds == 1000.0 for record in records):  # fmt: skip
                raise DuplicateSeriesError("two readings of one series")
            return store.write_scrapes(records)

    refusing = Refusing()
    collector = make_collector(base_url, refusing)
    cycles(collector, 2)
    assert collector.num_buffered == 0
    assert value(collector, cm.DROPPED_SCRAPES + "_total", reason=cm.DROPPED_REJECTED) == 1
    assert [t for t, _, _ in store.scrapes("bad")] == [1000.0, 1005.0]
    assert [t for t, _, _ in store.scrapes("ok")] == [1005.0]
    # the refused batch is retried one scrape at a time; the next cycle batches again
    assert refusing.batches == [["ok", "bad"], ["ok"], ["bad"], ["ok", "bad"]]
    assert value(collector, cm.SAMPLES_INGESTED + "_total", target="ok") == 1


def test_a_store_with_the_one_scrape_api_only_still_works(base_url, store):
    class OneAtATime:
        def __init__(self) -> None:
            self.calls = 0

        def write_scrape(self, record: ScrapeRecord) -> bool:
            self.calls += 1
            return store.write_scrape(record)

    one = OneAtATime()
    collector = make_collector(base_url, one)
    cycles(collector, 2)
    assert one.calls == 4 and collector.num_buffered == 0
    assert [t for t, _, _ in store.scrapes("ok")] == [1000.0, 1005.0]
    assert value(collector, cm.SAMPLES_INGESTED + "_total", target="ok") == 2


def test_own_metrics_exposition_names_every_target(base_url, store):
    collector = make_collector(base_url, store)
    cycles(collector, 1)
    text = generate_latest(collector.registry).decode()
    for name in (
        cm.TARGET_UP,
        cm.SCRAPE_DURATION_SECONDS,
        cm.SCRAPE_ERRORS + "_total",
        cm.SAMPLES_INGESTED + "_total",
        cm.WRITE_LATENCY_SECONDS + "_bucket",
        cm.BUFFERED_SCRAPES,
        cm.DROPPED_SCRAPES + "_total",
        cm.WRITE_DELAY_SECONDS + "_bucket",
        cm.SKIPPED_SCRAPES + "_total",
        cm.LAYOUT_CHANGES + "_total",
    ):
        assert name in text, name
    assert 'tailwatch_collector_target_up{target="bad"} 0.0' in text


@pytest.mark.parametrize("interval", [0.0, -1.0, float("inf"), float("nan")])
def test_the_interval_must_be_a_finite_positive_number(store, interval):
    with pytest.raises(ValueError, match="must be a finite number > 0"):
        Collector([], store, Scraper(), interval_seconds=interval)


def test_target_names_must_be_unique(store):
    targets = [Target("a", "http://127.0.0.1:1/metrics"), Target("a", "http://127.0.0.1:2/")]
    with pytest.raises(ValueError, match="repeated: a"):
        Collector(targets, store, Scraper())


def test_the_daemon_serves_its_metrics_and_stops_cleanly_on_sigterm(base_url, tmp_path):
    db = tmp_path / "tw.db"
    command = [sys.executable, "-m", "tailwatch.cli", "collect", "--target", base_url + "/ok"]
    command += ["--interval", "0.2", "--listen", "127.0.0.1:0", "--db-url", f"sqlite:///{db}"]
    daemon = subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    try:
        seen = []  # other start-up lines (e.g. "no GPU telemetry") may come first
        for _ in range(20):
            seen.append(daemon.stderr.readline())
            found = re.search(r"own metrics on (http://127\.0\.0\.1:\d+/metrics)", seen[-1])
            if found or not seen[-1]:
                break
        assert found, "".join(seen)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            text = httpx.get(found.group(1), timeout=5).text
            if re.search(r'samples_ingested_total\{target="127\.0\.0\.1:\d+"\} [2-9]', text):
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"no samples ingested:\n{text}")
        assert re.search(r'tailwatch_collector_target_up\{target="127\.0\.0\.1:\d+"\} 1\.0', text)
        answer = httpx.get(found.group(1).removesuffix("/metrics") + "/targets", timeout=5)
        (status,) = answer.json()["targets"]
        assert (status["health"], status["last_error"], status["url"]) == (
            "up",
            "",
            base_url + "/ok",
        )
        assert status["num_scrapes"] >= 2 and status["last_layout_change"] is None
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=10) == 0
        assert "collector stopped" in daemon.stderr.read()
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    target = base_url.removeprefix("http://")  # the default name: host:port
    assert len(Store(f"sqlite:///{db}").scrapes(target)) >= 2


def test_the_daemons_maintenance_is_counted_in_its_metrics(base_url, store):
    from collectors.collector_metrics import MaintenanceMetrics
    from collectors.store.retention import RetentionPolicy
    from tailwatch.collect_daemon import _maintain

    collector = make_collector(base_url, store)
    cycles(collector, 3)  # scrapes at 1000, 1005, 1010 (2 targets)
    registry = CollectorRegistry()
    metrics = MaintenanceMetrics(registry)
    # now (time.time()) is long after the scrapes: every minute is complete and rolled up,
    # two scrapes per call, so _maintain repeats the call until nothing is due
    _maintain(store, RetentionPolicy(max_scrapes_per_call=2), metrics)
    assert registry.get_sample_value("tailwatch_store_maintenance_runs_total") >= 3
    assert registry.get_sample_value("tailwatch_store_rolled_up_scrapes_total") == 6
    assert registry.get_sample_value("tailwatch_store_maintenance_errors_total") == 0
    assert registry.get_sample_value("tailwatch_store_maintenance_last_success_timestamp_seconds")

    class Broken:
        def maintain(self, now, policy):
            raise OperationalError("SELECT", {}, Exception("database is unavailable"))

    with pytest.raises(OperationalError):
        _maintain(Broken(), RetentionPolicy(), metrics)
    assert registry.get_sample_value("tailwatch_store_maintenance_errors_total") == 1


def test_watchers_run_after_each_written_round_and_a_failing_one_is_logged_once(
    base_url, store, caplog
):
    seen: list[tuple[float, int]] = []
    wall = iter([2000.0, 2015.0, 2030.0])

    def count(now: float) -> None:  # what it sees: the round's scrapes already stored
        seen.append((now, num_readings(store, "ok")))

    def broken(now: float) -> None:
        raise RuntimeError("the change store refused the write")

    collector = make_collector(
        base_url, store, watchers=[broken, count], wall_clock=lambda: next(wall)
    )
    with caplog.at_level("WARNING", logger="tailwatch.collector"):
        cycles(collector, 3)
    assert seen == [(2000.0, 1), (2015.0, 2), (2030.0, 3)]
    failed = [
        r.getMessage() for r in caplog.records if "the change store refused" in r.getMessage()
    ]
    assert len(failed) == 1 and "broken" in failed[0], failed


def test_without_an_evaluator_the_collector_records_changes_itself(tmp_path):
    """`tailwatch collect` without alerts.in_collector runs the change detector after its
    scrapes; with it, the evaluator's detector does (change_watch is the one it runs)."""
    from collectors.changes import ChangeDetector
    from tailwatch.collect_evaluation import change_watch
    from tailwatch.config import load_config

    config = tmp_path / "tailwatch.yaml"
    config.write_text("alerts:\n  window_scale: 0.1\n", encoding="utf-8")
    store = Store(f"sqlite:///{tmp_path / 'tw.db'}")
    detector = change_watch(load_config(config), store)
    assert isinstance(detector, ChangeDetector) and detector.sink is store
    assert detector.options.margin_seconds < ChangeDetector(store, store).options.margin_seconds
