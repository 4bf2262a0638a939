"""The collection loop: scrape every target each interval, write each scrape to the store,
and buffer scrapes (bounded) while the database is unavailable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry
from sqlalchemy.exc import SQLAlchemyError

from collectors.collector_metrics import DROPPED_BUFFER_FULL, DROPPED_REJECTED, CollectorMetrics
from collectors.scrape import Scraper, Target
from collectors.store.records import ScrapeRecord
from collectors.store.repository import Store

logger = logging.getLogger("tailwatch.collector")

DEFAULT_MAX_BUFFERED_SCRAPES = 10_000
#: The share of the interval a cycle may spend writing before it leaves the rest buffered.
WRITE_BUDGET_SHARE = 0.8


class Collector:
    """Scrapes ``targets`` every ``interval_seconds`` and writes each scrape to ``store``.

    Writes run in a worker thread (``asyncio.to_thread``) and stop for the cycle once
    ``WRITE_BUDGET_SHARE`` of the interval has passed, so draining a backlog delays the next
    scrape by at most the one write in flight. When a write fails with a SQLAlchemy error, that scrape
    and the ones after it wait in a buffer of at most ``max_buffered_scrapes``, retried
    oldest first next cycle; past the bound the oldest are dropped, logged and counted. A
    retried scrape the store already holds is stored once (the store's writes are
    idempotent). ``clock`` (monotonic seconds) schedules cycles and the write budget.
    """

    def __init__(
        self,
        targets: Sequence[Target],
        store: Store,
        scraper: Scraper,
        interval_seconds: float = 5.0,
        registry: CollectorRegistry | None = None,
        max_buffered_scrapes: int = DEFAULT_MAX_BUFFERED_SCRAPES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not interval_seconds > 0:
            raise ValueError(f"interval_seconds={interval_seconds}: must be > 0")
        if max_buffered_scrapes < 1:
            raise ValueError(f"max_buffered_scrapes={max_buffered_scrapes}: must be >= 1")
        names = [target.name for target in targets]
        duplicated = sorted({name for name in names if names.count(name) > 1})
        if duplicated:
            raise ValueError(f"target names must be unique; repeated: {', '.join(duplicated)}")
        self.targets = tuple(targets)
        self.store = store
        self.scraper = scraper
        self.interval_seconds = interval_seconds
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = CollectorMetrics(self.registry)
        self.max_buffered_scrapes = max_buffered_scrapes
        self._clock = clock
        self._buffer: deque[ScrapeRecord] = deque()
        self._failed_writes: set[tuple[str, float]] = set()  # buffered scrapes tried before
        #: The last scrape error per target ("" once it scrapes again).
        self.last_errors: dict[str, str] = {}
        self.num_cycles = 0
        for target in self.targets:  # every target visible from the first /metrics on
            self.metrics.target_up.labels(target.name).set(0)
            self.metrics.scrape_errors.labels(target.name)
            self.metrics.samples_ingested.labels(target.name)
        for reason in (DROPPED_BUFFER_FULL, DROPPED_REJECTED):
            self.metrics.dropped_scrapes.labels(reason)

    @property
    def num_buffered(self) -> int:
        return len(self._buffer)

    async def run(self, stop: asyncio.Event) -> None:
        """Run cycles until ``stop`` is set. Cycle ``k`` starts at ``start + k * interval``
        (no drift from the time a cycle takes); a cycle that overruns skips the starts it
        missed rather than running back to back."""
        next_start = self._clock()
        while not stop.is_set():
            await self.run_once()
            next_start += self.interval_seconds
            now = self._clock()
            if now > next_start:  # overran: keep the phase, skip the missed starts
                missed = (now - next_start) // self.interval_seconds + 1
                next_start += missed * self.interval_seconds
                logger.warning("scrape cycle overran; skipped %d start(s)", int(missed))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=next_start - now)

    async def run_once(self) -> list[ScrapeRecord]:
        """One cycle: scrape every target, then write the buffered scrapes and the new ones,
        oldest first. Returns this cycle's scrapes."""
        started = self._clock()
        records = await self.scraper.scrape_all(self.targets)
        for record in records:
            self._observe(record)
        # NOTE: the bound applies after the write attempt, so a database that has just come
        # back takes the backlog plus this cycle's scrapes and nothing is dropped. Writing
        # stops once WRITE_BUDGET_SHARE of the interval is spent, so draining a long backlog
        # never delays the next scrape; the rest waits, oldest first, for the next cycle.
        self._buffer.extend(records)
        await self._flush(deadline=started + WRITE_BUDGET_SHARE * self.interval_seconds)
        self._trim_buffer()
        self.metrics.buffered_scrapes.set(len(self._buffer))
        self.num_cycles += 1
        return records

    def _observe(self, record: ScrapeRecord) -> None:
        target = record.target
        self.metrics.target_up.labels(target).set(1 if record.is_up else 0)
        if record.duration_seconds is not None:
            self.metrics.scrape_duration_seconds.labels(target).set(record.duration_seconds)
        previous = self.last_errors.get(target, "")
        self.last_errors[target] = record.error
        if not record.is_up:
            self.metrics.scrape_errors.labels(target).inc()
        # NOTE: logged on change only: a target down for an hour is one line, not 720.
        if record.error != previous:
            if record.is_up:
                logger.info("scrape of %s recovered", target)
            else:
                logger.warning("scrape of %s failed: %s", target, record.error)

    def _trim_buffer(self) -> None:
        while len(self._buffer) > self.max_buffered_scrapes:
            dropped = self._buffer.popleft()
            self._failed_writes.discard(_identity(dropped))
            self.metrics.dropped_scrapes.labels(DROPPED_BUFFER_FULL).inc()
            logger.warning(
                "write buffer full (%d scrapes): dropped the oldest, %s at %.3f",
                self.max_buffered_scrapes, dropped.target, dropped.timestamp_seconds,
            )  # fmt: skip

    async def _flush(self, deadline: float) -> None:
        # NOTE: stop at the first database error: the database is most likely down, and
        # writing later scrapes first would not lose them but would reorder the retries.
        while self._buffer and self._clock() < deadline:
            record = self._buffer[0]
            started = time.perf_counter()
            try:
                written = await asyncio.to_thread(self.store.write_scrape, record)
            except SQLAlchemyError as error:
                self._failed_writes.add(_identity(record))
                self.metrics.write_latency_seconds.observe(time.perf_counter() - started)
                self.metrics.write_errors.inc()
                logger.warning(
                    "database write failed, %d scrape(s) buffered: %s",
                    len(self._buffer), _first_line(error),
                )  # fmt: skip
                return
            except ValueError as error:  # refused for good, e.g. DuplicateSeriesError
                self._buffer.popleft()
                self._failed_writes.discard(_identity(record))
                self.metrics.dropped_scrapes.labels(DROPPED_REJECTED).inc()
                logger.error("store refused the scrape of %s: %s", record.target, error)
                continue
            self.metrics.write_latency_seconds.observe(time.perf_counter() - started)
            self._buffer.popleft()
            # NOTE: "already stored" after a failed attempt means that attempt committed and
            # only its reply was lost: its samples were ingested, by us, and count now.
            retried = _identity(record) in self._failed_writes
            self._failed_writes.discard(_identity(record))
            if written or retried:
                num = len(record.samples) + len(record.histograms) + len(record.raw)
                self.metrics.samples_ingested.labels(record.target).inc(num)


def _identity(record: ScrapeRecord) -> tuple[str, float]:
    return record.target, record.timestamp_seconds


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__
