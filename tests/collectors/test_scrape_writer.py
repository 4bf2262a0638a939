"""The one writer as its own task (``ScrapeWriter.run``): it retries a failing database an
interval later rather than in a hot loop, survives an unexpected error from the store without
losing a scrape, and keeps a hanging write's batch intact while the buffer is bounded."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy.exc import OperationalError

from collectors import collector_metrics as cm
from collectors.collector_metrics import CollectorMetrics
from collectors.scrape_writer import ScrapeWriter
from collectors.store import ScrapeRecord, Store
from tests.collectors.waiting import WAIT_SECONDS, wait_until


@pytest.fixture
def backend() -> str:
    return "sqlite"  # NOTE: conftest's store, on SQLite only: what is under test is not the store


def records(target: str, first: int, count: int) -> list[ScrapeRecord]:
    return [ScrapeRecord(target, 1000.0 + k) for k in range(first, first + count)]


def run_writer(writer: ScrapeWriter, scenario) -> None:
    async def go() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(writer.run(stop))
        try:
            await scenario()
        finally:
            stop.set()
            await asyncio.wait_for(task, timeout=WAIT_SECONDS)

    asyncio.run(go())


class FailingStore:
    """Raises ``errors`` in turn, then writes to ``store``."""

    def __init__(self, store: Store, errors: list[Exception]) -> None:
        self.store = store
        self.errors = errors
        self.calls = 0

    def write_scrapes(self, batch: list[ScrapeRecord]) -> list[bool]:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.store.write_scrapes(batch)


@pytest.mark.parametrize(
    "error",
    [
        OperationalError("INSERT", {}, Exception("database is unavailable")),
        RuntimeError("a bug in the store"),  # not a database error: logged, kept, retried
    ],
    ids=["database", "unexpected"],
)
def test_a_failed_write_is_retried_an_interval_later_and_nothing_is_lost(store, error, caplog):
    failing = FailingStore(store, [error, error])
    registry = CollectorRegistry()
    writer = ScrapeWriter(failing, CollectorMetrics(registry), retry_seconds=0.5)

    async def scenario() -> None:
        writer.add(records("a", 0, 3))
        await wait_until(lambda: failing.calls >= 1, "the first attempt")
        writer.add(records("a", 3, 2))  # arrivals while the database is down do not retry
        await wait_until(lambda: writer.num_buffered == 0, "the backlog written")

    with caplog.at_level(logging.WARNING, logger="tailwatch.collector"):
        run_writer(writer, scenario)
    assert [t for t, _, _ in store.scrapes("a")] == [1000.0 + k for k in range(5)]
    assert failing.calls == 3  # two failures, one interval apart, then one batch of five
    assert registry.get_sample_value(cm.WRITE_ERRORS + "_total") == 2
    assert registry.get_sample_value(cm.WRITE_DELAY_SECONDS + "_count") == 5
    if isinstance(error, RuntimeError):
        assert "writing 3 scrape(s) failed unexpectedly" in caplog.text
        assert "a bug in the store" in caplog.text  # the traceback is logged


def test_a_hanging_write_keeps_its_batch_while_the_buffer_stays_bounded(store):
    release = threading.Event()

    class HangingStore:
        def __init__(self) -> None:
            self.batches: list[list[float]] = []

        def write_scrapes(self, batch: list[ScrapeRecord]) -> list[bool]:
            self.batches.append([r.timestamp_seconds for r in batch])
            if len(self.batches) == 1:
                release.wait(WAIT_SECONDS)  # the first transaction hangs until released
            return store.write_scrapes(batch)

    hanging = HangingStore()
    registry = CollectorRegistry()
    writer = ScrapeWriter(hanging, CollectorMetrics(registry), max_buffered_scrapes=4)

    async def scenario() -> None:
        writer.add(records("a", 0, 2))
        await wait_until(lambda: len(hanging.batches) == 1, "the hanging write")
        writer.add(records("a", 2, 9))  # past twice the bound: the oldest buffered go
        assert writer.num_buffered == 2 + 4  # the batch in flight, and the bound
        release.set()
        await wait_until(lambda: writer.num_buffered == 0, "the rest written")

    run_writer(writer, scenario)
    stored = [t for t, _, _ in store.scrapes("a")]
    assert stored == [1000.0, 1001.0] + [1000.0 + k for k in range(7, 11)]
    value = registry.get_sample_value
    assert value(cm.DROPPED_SCRAPES + "_total", {"reason": cm.DROPPED_BUFFER_FULL}) == 5
    assert value(cm.BUFFERED_SCRAPES) == 0
