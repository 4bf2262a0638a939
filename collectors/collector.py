"""The collection: every target scraped on its own schedule (``collectors.scrape_schedule``),
each finished scrape handed at once to the one writer (``collectors.scrape_writer``), and
what each scrape shows recorded per target (up or down, overruns, bucket-layout changes).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from collectors.collector_metrics import (
    DROPPED_BUFFER_FULL,
    DROPPED_REJECTED,
    CollectorMetrics,
    SourceMetrics,
)
from collectors.event_wait import wait_for_event
from collectors.first_round import FirstRound
from collectors.scrape import DEFAULT_INTERVAL_SECONDS, Scraper, Target
from collectors.scrape_schedule import ScrapeLoop, first_slot, phase_offset_seconds
from collectors.scrape_writer import (
    BUFFER_FILE_FORMAT,
    DEFAULT_MAX_BUFFERED_SCRAPES,
    DEFAULT_WRITE_BATCH_SIZE,
    ScrapeWriter,
)
from collectors.store.protocols import ScrapeStore
from collectors.store.records import ScrapeRecord
from collectors.target_status import TargetBook, TargetStatus

if TYPE_CHECKING:
    from collectors.gpu import GpuTelemetry
    from collectors.targets_file import TargetsFileWatcher

logger = logging.getLogger("tailwatch.collector")

__all__ = [
    "BUFFER_FILE_FORMAT",
    "DEFAULT_MAX_BUFFERED_SCRAPES",
    "DEFAULT_WRITE_BATCH_SIZE",
    "Collector",
]


class Collector:
    """Scrapes ``targets`` every ``interval_seconds`` and writes each scrape to ``store``.

    :meth:`run` gives each target (and the GPU telemetry) its own loop, phase-offset by its
    name, so no target's latency delays another's scrape or write; the writer batches what
    arrives (see ``collectors.scrape_writer`` for buffering, retries, drops and the spill
    file). :meth:`run_once` scrapes every target together and writes everything buffered:
    one synchronous round, for tests and benchmarks. ``clock`` (monotonic seconds) schedules
    the slots; the waits themselves are real.

    ``watchers`` are called with the wall time (``wall_clock``, Unix seconds) after each
    round is written (:meth:`run_once`) and once an interval while :meth:`run` scrapes: the
    change detector (``collectors.changes``) where no evaluator runs it, so a collection
    without alerts still records what changed. A watcher that fails is logged, never raised.
    """

    def __init__(
        self,
        targets: Sequence[Target],
        store: ScrapeStore,
        scraper: Scraper,
        interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
        registry: CollectorRegistry | None = None,
        max_buffered_scrapes: int = DEFAULT_MAX_BUFFERED_SCRAPES,
        clock: Callable[[], float] = time.monotonic,
        targets_source: TargetsFileWatcher | None = None,
        gpu: GpuTelemetry | None = None,
        watchers: Sequence[Callable[[float], object]] = (),
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if not (interval_seconds > 0 and math.isfinite(interval_seconds)):
            raise ValueError(f"interval_seconds={interval_seconds}: must be a finite number > 0")
        names = [target.name for target in targets]
        duplicated = sorted({name for name in names if names.count(name) > 1})
        if duplicated:
            raise ValueError(f"target names must be unique; repeated: {', '.join(duplicated)}")
        self.targets = tuple(targets)
        self.scraper = scraper
        self.interval_seconds = interval_seconds
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = CollectorMetrics(self.registry)
        self._clock = clock
        self.watchers = tuple(watchers)
        self._wall_clock = wall_clock
        self._watch_errors: dict[int, str] = {}
        #: Set once every target the collection started with has a scrape in the store.
        self.first_round = FirstRound()
        self.writer = ScrapeWriter(
            store,
            self.metrics,
            max_buffered_scrapes,
            retry_seconds=interval_seconds,
            clock=clock,
            on_stored=self.first_round.on_stored,
        )
        self.book = TargetBook(self.metrics, interval_seconds)
        #: :meth:`run_once` rounds done.
        self.num_cycles = 0
        for target in self.targets:  # every target visible from the first /metrics on
            self.book.add(target.name, target.url)
        for reason in (DROPPED_BUFFER_FULL, DROPPED_REJECTED):
            self.metrics.dropped_scrapes.labels(reason)
        self._init_sources(targets_source, gpu)

    # -- the writer (collectors.scrape_writer) ------------------------------------------------

    @property
    def store(self) -> ScrapeStore:
        return self.writer.store

    @property
    def num_buffered(self) -> int:
        return self.writer.num_buffered

    @property
    def max_buffered_scrapes(self) -> int:
        return self.writer.max_buffered_scrapes

    @property
    def write_batch_size(self) -> int:
        """Scrapes per write transaction (``DEFAULT_WRITE_BATCH_SIZE``); settable."""
        return self.writer.write_batch_size

    @write_batch_size.setter
    def write_batch_size(self, size: int) -> None:
        self.writer.write_batch_size = size

    async def flush(self) -> bool:
        """Write everything buffered now; ``False`` if the database refused (still buffered)."""
        return await self.writer.flush()

    def save_buffer(self, path: str | os.PathLike[str]) -> int:
        """The scrapes still buffered, saved to ``path`` (``ScrapeWriter.save``)."""
        return self.writer.save(path)

    def load_buffer(self, path: str | os.PathLike[str]) -> int:
        """A previous run's saved scrapes, queued first (``ScrapeWriter.load``)."""
        return self.writer.load(path)

    # -- what each scrape shows, per target (collectors.target_status) ------------------------

    @property
    def last_errors(self) -> dict[str, str]:
        """The last scrape error per target ("" once it scrapes again)."""
        return self.book.last_errors

    def target_statuses(self) -> list[TargetStatus]:
        """Every current target's status (and the GPU telemetry's, when read), in order."""
        return self.book.statuses()

    def _accept(self, record: ScrapeRecord) -> None:
        """A finished scrape: recorded for its target, then handed to the writer."""
        self.book.observe(record)
        self.writer.add([record])

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
                self.book.add(gpu.target, "nvml")
        self._update_source_gauges()

    def update_targets(self, targets: Sequence[Target]) -> tuple[list[str], list[str]]:
        """Scrape the static targets plus ``targets`` (a targets file's) from now on; returns the names added and removed. A name used twice, or also by a static
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
        urls = {target.name: target.url for target in self.targets}
        for name in added:
            self.book.add(name, urls[name])
        for name in removed:
            self.book.remove(name)
        self._update_source_gauges()
        return added, removed

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

    async def _gpu_record(self) -> ScrapeRecord | None:
        """This cycle's GPU record, if any (NVML calls block briefly: run in a thread)."""
        if self.gpu is None or not self.gpu.available:
            self._update_source_gauges()
            return None
        record = await asyncio.to_thread(self.gpu.read)
        self._update_source_gauges()
        return record

    async def run(self, stop: asyncio.Event) -> None:
        """Scrape until ``stop`` is set: one :class:`ScrapeLoop` per target (and one for the
        GPU telemetry), slot ``k`` of a target at ``start + offset + k × interval`` with the
        offset fixed by its name; the targets file is read once per interval and its changes
        start and stop loops. When ``stop`` is set the scrapes in flight finish (bounded by
        the scraper's timeout) and everything buffered is written once more."""
        timeout = getattr(self.scraper, "timeout_seconds", None)
        if timeout is not None and timeout > self.interval_seconds:
            logger.warning(
                "scrape timeout %g s exceeds the %g s interval: a target that does not answer "
                "overruns every slot", timeout, self.interval_seconds,
            )  # fmt: skip
        start = self._clock()
        loops: dict[str, tuple[Target | None, asyncio.Task[None]]] = {}
        # NOTE: the writer stops after the loops, so the scrapes they finish after stop is set
        # are in its last flush.
        writer_stop = asyncio.Event()
        writing = asyncio.create_task(self.writer.run(writer_stop))
        try:
            if self.gpu is not None:
                loops[self.gpu.target] = (None, self._start_loop(self.gpu.target, start, stop))
            next_poll = start
            while not stop.is_set():
                self._poll_targets()
                self._sync_loops(loops, start, stop)
                self.first_round.track(target.name for target in self.targets)
                if self.watchers:
                    await asyncio.to_thread(self._watch)
                next_poll += self.interval_seconds
                await wait_for_event(stop, next_poll - self._clock())
        finally:
            running = [task for _, task in loops.values()]
            if not stop.is_set():  # cancelled, not stopped: the loops go too
                for task in running:
                    task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            if stop.is_set():
                writer_stop.set()
                await writing  # ends with one last flush
            else:
                writing.cancel()
                await asyncio.gather(writing, return_exceptions=True)

    def _sync_loops(
        self,
        loops: dict[str, tuple[Target | None, asyncio.Task[None]]],
        start: float,
        stop: asyncio.Event,
    ) -> None:
        """Start a loop for each new (or changed) target, cancel those of removed ones."""
        wanted = {target.name: target for target in self.targets}
        for name, (target, task) in list(loops.items()):
            if target is not None and wanted.get(name) != target:
                task.cancel()  # NOTE: a removed target's scrape in flight is not written
                del loops[name]
        for name, target in wanted.items():
            if name not in loops:
                loops[name] = (target, self._start_loop(name, start, stop, target))

    def _start_loop(
        self, name: str, start: float, stop: asyncio.Event, target: Target | None = None
    ) -> asyncio.Task[None]:
        offset = phase_offset_seconds(name, self.interval_seconds)
        first = first_slot(start, offset, self._clock(), self.interval_seconds)

        async def scrape() -> ScrapeRecord | None:  # NOTE: self.scraper read at each slot
            return await (self._gpu_record() if target is None else self.scraper.scrape(target))

        loop = ScrapeLoop(
            name,
            scrape,
            self._accept,
            lambda report: self.book.on_slot(name, report),
            self.interval_seconds,
            first,
            self._clock,
        )
        return asyncio.create_task(loop.run(stop), name=f"scrape {name}")

    async def run_once(self) -> list[ScrapeRecord]:
        """One round: scrape every target together (``Scraper.scrape_all``) and the GPU
        telemetry, then write everything buffered, oldest first. Returns the new scrapes."""
        self._poll_targets()
        self.first_round.track(target.name for target in self.targets)
        records = list(await self.scraper.scrape_all(self.targets))
        gpu_record = await self._gpu_record()
        if gpu_record is not None:
            records.append(gpu_record)
        for record in records:
            self._accept(record)
        await self.writer.flush()
        self._watch()
        self.num_cycles += 1
        return records

    def _watch(self) -> None:
        """Each watcher with the wall time; a failure is logged when its message changes."""
        now = self._wall_clock()
        for i, watch in enumerate(self.watchers):
            try:
                watch(now)
            except Exception as error:  # NOTE: a failing watcher must not stop the scrapes
                message = str(error).splitlines()[0] if str(error) else type(error).__name__
                if self._watch_errors.get(i) != message:
                    logger.warning(
                        "watcher %s failed: %s", getattr(watch, "__qualname__", watch), message
                    )
                self._watch_errors[i] = message
            else:
                self._watch_errors.pop(i, None)
