"""The collection loop: scrape every target each interval, write each scrape to the store,
and buffer scrapes (bounded) while the database is unavailable.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from sqlalchemy.exc import SQLAlchemyError

from collectors import spill
from collectors.collector_metrics import (
    DROPPED_BUFFER_FULL,
    DROPPED_REJECTED,
    CollectorMetrics,
    SourceMetrics,
)
from collectors.scrape import Scraper, Target
from collectors.store.records import ScrapeRecord
from collectors.store.repository import Store

if TYPE_CHECKING:
    from collectors.gpu import GpuTelemetry
    from collectors.targets_file import TargetsFileWatcher

logger = logging.getLogger("tailwatch.collector")

DEFAULT_MAX_BUFFERED_SCRAPES = 10_000
#: Scrapes written per transaction (``Store.write_scrapes``); a cycle's scrapes of a fleet
#: of up to this many targets go in one.
DEFAULT_WRITE_BATCH_SIZE = 250
#: The first item of a saved-buffer file (:meth:`Collector.save_buffer`).
BUFFER_FILE_FORMAT = "tailwatch-collector-buffer-v1"
#: The share of the interval a cycle may spend writing before it leaves the rest buffered.
WRITE_BUDGET_SHARE = 0.8


class Collector:
    """Scrapes ``targets`` every ``interval_seconds`` and writes each scrape to ``store``.

    Writes run in a worker thread (``asyncio.to_thread``), a batch of up to
    ``write_batch_size`` scrapes per transaction (``Store.write_scrapes``), and stop for the
    cycle once ``WRITE_BUDGET_SHARE`` of the interval has passed, so draining a backlog delays
    the next scrape by at most the one batch in flight. When a write fails with a SQLAlchemy
    error, that batch and the scrapes after it wait in a buffer of at most ``max_buffered_scrapes``, retried
    oldest first next cycle; past the bound the oldest are dropped, logged and counted. A
    retried scrape the store already holds is stored once (the store's writes are
    idempotent). ``clock`` (monotonic seconds) schedules cycles and the write budget.
    """

    #: Scrapes per write transaction; set on an instance to change it.
    write_batch_size: int = DEFAULT_WRITE_BATCH_SIZE

    def __init__(
        self,
        targets: Sequence[Target],
        store: Store,
        scraper: Scraper,
        interval_seconds: float = 5.0,
        registry: CollectorRegistry | None = None,
        max_buffered_scrapes: int = DEFAULT_MAX_BUFFERED_SCRAPES,
        clock: Callable[[], float] = time.monotonic,
        targets_source: TargetsFileWatcher | None = None,
        gpu: GpuTelemetry | None = None,
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
        self._init_sources(targets_source, gpu)

    @property
    def num_buffered(self) -> int:
        return len(self._buffer)

    # -- the target list (static + targets file) and GPU telemetry ---------------------------

    def _init_sources(
        self, targets_source: TargetsFileWatcher | None, gpu: GpuTelemetry | None
    ) -> None:
        self.static_targets = self.targets
        self.targets_source = targets_source
        #: Why the targets file's current content is not in use ("" while it is).
        self.targets_file_error = ""
        self.gpu = gpu
        self.source_metrics = SourceMetrics(self.registry)
        if gpu is not None:
            gpu.start()  # NOTE: idempotent; raises in mode "on" when NVML cannot be used
            if gpu.target in {target.name for target in self.targets}:
                raise ValueError(f"target name {gpu.target!r} is the GPU telemetry's own")
            if gpu.available:
                self._init_target_metrics(gpu.target)
        self._update_source_gauges()

    def update_targets(self, targets: Sequence[Target]) -> tuple[list[str], list[str]]:
        """Scrape the static targets plus ``targets`` (a targets file's) from the next cycle
        on; returns the names added and removed. A name used twice, or also by a static
        target, is a ``ValueError`` and changes nothing. A removed target's gauges
        (``target_up``, scrape duration) go; its counters stay."""
        static = {target.name for target in self.static_targets}
        if self.gpu is not None:
            static.add(self.gpu.target)
        seen: set[str] = set()
        for target in targets:
            if target.name in static:
                raise ValueError(f"target {target.name!r} is also a static target")
            if target.name in seen:
                raise ValueError(f"target {target.name!r} is listed twice")
            seen.add(target.name)
        before = {target.name for target in self.targets}
        self.targets = (*self.static_targets, *targets)
        after = {target.name for target in self.targets}
        added, removed = sorted(after - before), sorted(before - after)
        for name in added:
            self._init_target_metrics(name)
        for name in removed:
            for gauge in (self.metrics.target_up, self.metrics.scrape_duration_seconds):
                with contextlib.suppress(KeyError):
                    gauge.remove(name)
            self.last_errors.pop(name, None)
        self._update_source_gauges()
        return added, removed

    def _init_target_metrics(self, name: str) -> None:
        self.metrics.target_up.labels(name).set(0)
        self.metrics.scrape_errors.labels(name)
        self.metrics.samples_ingested.labels(name)

    def _update_source_gauges(self) -> None:
        available = self.gpu is not None and self.gpu.available
        self.source_metrics.gpu_telemetry_available.set(1 if available else 0)
        self.source_metrics.targets.set(len(self.targets) + (1 if available else 0))

    def _poll_targets(self) -> None:
        """Take the targets file's changes, if any. A file that cannot be used is logged and
        counted once per change, and the previous list keeps being scraped."""
        if self.targets_source is None:
            return
        where = str(getattr(self.targets_source, "path", "targets file"))
        added: list[str] = []
        removed: list[str] = []
        try:
            update = self.targets_source.poll()
            if update is None:
                return
            error = update.error
            if update.targets is not None:
                added, removed = self.update_targets([t.to_target() for t in update.targets])
        except ValueError as problem:
            error = f"{where}: {problem}"
        except Exception as problem:  # NOTE: a bug here must not stop the collection
            logger.exception("reading the targets file %s failed", where)
            error = f"{where}: internal error: {type(problem).__name__}: {problem}"
        if error:
            self.targets_file_error = error
            self.source_metrics.targets_file_errors.inc()
            self.source_metrics.targets_file_valid.set(0)
            logger.warning(
                "targets file not used: %s; still scraping the previous %d target(s)",
                error, len(self.targets),
            )  # fmt: skip
            return
        self.targets_file_error = ""
        self.source_metrics.targets_file_valid.set(1)
        logger.info(
            "targets file %s: %d target(s) from it (added: %s; removed: %s)",
            where, len(self.targets) - len(self.static_targets),
            ", ".join(added) or "none", ", ".join(removed) or "none",
        )  # fmt: skip

    async def _gpu_records(self) -> list[ScrapeRecord]:
        """This cycle's GPU record (NVML calls block briefly: run in a thread)."""
        if self.gpu is None or not self.gpu.available:
            self._update_source_gauges()
            return []
        record = await asyncio.to_thread(self.gpu.read)
        self._update_source_gauges()
        return [] if record is None else [record]

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
        self._poll_targets()
        records = await self.scraper.scrape_all(self.targets)
        records = [*records, *(await self._gpu_records())]
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

    def save_buffer(self, path: str | os.PathLike[str]) -> int:
        """Write the scrapes still buffered (the database was unavailable) to ``path``, so a
        restarted collector can write them (:meth:`load_buffer`); returns how many. With an
        empty buffer nothing is written and a stale file is removed (``collectors.spill``)."""
        if not self._buffer:
            Path(path).unlink(missing_ok=True)
            return 0
        spill.save(path, BUFFER_FILE_FORMAT, list(self._buffer))
        logger.warning(
            "%d buffered scrape(s) not yet in the store saved to %s; the next start writes them",
            len(self._buffer), path,
        )  # fmt: skip
        return len(self._buffer)

    def load_buffer(self, path: str | os.PathLike[str]) -> int:
        """Put the scrapes a previous run saved with :meth:`save_buffer` ahead of everything
        buffered, oldest first, and remove the file; returns how many. A file that cannot be
        read is moved aside to ``<path>.unreadable`` (kept for inspection) and logged."""
        try:
            records = spill.load(path, BUFFER_FILE_FORMAT, ScrapeRecord)
        except spill.UnreadableSpillError as error:
            logger.error("cannot read saved scrapes %s", error)
            return 0
        if records is None:
            return 0
        self._buffer.extendleft(reversed(records))
        self._trim_buffer()
        self.metrics.buffered_scrapes.set(len(self._buffer))
        logger.info("%d scrape(s) saved by the previous run queued for writing", len(records))
        return len(records)

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
        # Scrapes go in batches (one transaction each) of at most write_batch_size, oldest
        # first; the budget is checked between batches. A batch the store refuses (one of its
        # scrapes holds a series twice) is written again one scrape at a time, so that only
        # the offending scrape is dropped.
        write_many = getattr(self.store, "write_scrapes", None)
        singles = 0  # scrapes still to write one at a time after a refused batch
        while self._buffer and self._clock() < deadline:
            size = 1 if singles or write_many is None else self.write_batch_size
            batch = list(itertools.islice(self._buffer, max(1, size)))
            started = time.perf_counter()
            try:
                if write_many is None:  # a store with the one-scrape API only
                    written = [await asyncio.to_thread(self.store.write_scrape, batch[0])]
                else:
                    written = await asyncio.to_thread(write_many, batch)
            except SQLAlchemyError as error:
                self._failed_writes.update(_identity(record) for record in batch)
                self.metrics.write_latency_seconds.observe(time.perf_counter() - started)
                self.metrics.write_errors.inc()
                logger.warning(
                    "database write failed, %d scrape(s) buffered: %s",
                    len(self._buffer), _first_line(error),
                )  # fmt: skip
                return
            except ValueError as error:  # refused for good, e.g. DuplicateSeriesError
                if len(batch) > 1:
                    singles = len(batch)
                    continue
                record = self._buffer.popleft()
                singles = max(0, singles - 1)
                self._failed_writes.discard(_identity(record))
                self.metrics.dropped_scrapes.labels(DROPPED_REJECTED).inc()
                logger.error("store refused the scrape of %s: %s", record.target, error)
                continue
            self.metrics.write_latency_seconds.observe(time.perf_counter() - started)
            singles = max(0, singles - len(batch))
            for record, is_new in zip(batch, written, strict=True):
                self._buffer.popleft()
                # NOTE: "already stored" after a failed attempt means that attempt committed
                # and only its reply was lost: its samples were ingested, by us, and count now.
                retried = _identity(record) in self._failed_writes
                self._failed_writes.discard(_identity(record))
                if is_new or retried:
                    num = len(record.samples) + len(record.histograms) + len(record.raw)
                    self.metrics.samples_ingested.labels(record.target).inc(num)


def _identity(record: ScrapeRecord) -> tuple[str, float]:
    return record.target, record.timestamp_seconds


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__
