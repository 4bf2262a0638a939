"""The one writer of scrapes into the store: a bounded buffer, batched transactions, retries
while the database is unavailable, and the spill file at shutdown.

Scrape loops hand each finished scrape over (:meth:`ScrapeWriter.add`) and go on; one writer
task (:meth:`ScrapeWriter.run`) writes whatever is buffered, oldest first, in batches of up
to ``write_batch_size`` scrapes per transaction (``Store.write_scrapes``). NOTE: no linger:
the writer writes as soon as anything is buffered, and the scrapes that arrive while a
transaction is in flight make up the next batch (group commit), so batches grow with the
load and a scrape waits at most for the transaction in flight and its own.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from collectors import spill
from collectors.collector_metrics import DROPPED_BUFFER_FULL, DROPPED_REJECTED, CollectorMetrics
from collectors.event_wait import wait_for_event
from collectors.store.protocols import ScrapeStore
from collectors.store.records import ScrapeRecord

logger = logging.getLogger("tailwatch.collector")

DEFAULT_MAX_BUFFERED_SCRAPES = 10_000
#: Scrapes written per transaction (``Store.write_scrapes``).
DEFAULT_WRITE_BATCH_SIZE = 250
#: The first item of a saved-buffer file (:meth:`ScrapeWriter.save`).
BUFFER_FILE_FORMAT = "tailwatch-collector-buffer-v1"


@dataclass(slots=True)
class _Pending:
    """A buffered scrape, with when it was handed over (``None``: loaded from a saved
    buffer) and whether a write of it has failed before."""

    record: ScrapeRecord
    handed_at: float | None
    is_retried: bool = False


class ScrapeWriter:
    """Writes handed-over scrapes to ``store``; see the module docstring.

    When a write fails with a SQLAlchemy error, that batch and the scrapes after it stay
    buffered (at most ``max_buffered_scrapes``, applied after each write attempt; past it the
    oldest are dropped, logged and counted) and :meth:`run` retries ``retry_seconds`` later,
    oldest first; any other error from the store is logged in full and handled the same way,
    so the writer never dies with scrapes in its buffer. A retried scrape the store already holds is stored once (the store's writes
    are idempotent) and its samples are counted once. ``clock`` (monotonic seconds) times the
    delay from hand-over to commit (``write_delay_seconds``). ``on_stored`` gets each batch
    once the store holds it (written now, or found already written).
    """

    def __init__(
        self,
        store: ScrapeStore,
        metrics: CollectorMetrics,
        max_buffered_scrapes: int = DEFAULT_MAX_BUFFERED_SCRAPES,
        retry_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        on_stored: Callable[[list[ScrapeRecord]], None] | None = None,
    ) -> None:
        if max_buffered_scrapes < 1:
            raise ValueError(f"max_buffered_scrapes={max_buffered_scrapes}: must be >= 1")
        self.store = store
        self.metrics = metrics
        self.max_buffered_scrapes = max_buffered_scrapes
        self.retry_seconds = retry_seconds
        self.write_batch_size = DEFAULT_WRITE_BATCH_SIZE
        self._clock = clock
        self._on_stored = on_stored
        self._buffer: deque[_Pending] = deque()
        self._in_flight: list[_Pending] = []  # the batch being written, off the buffer
        self._arrived: asyncio.Event | None = None  # set by add(); made in run()'s loop

    @property
    def num_buffered(self) -> int:
        """Scrapes not yet stored: buffered, and in the transaction in flight."""
        return len(self._buffer) + len(self._in_flight)

    def add(self, records: Iterable[ScrapeRecord]) -> None:
        """Buffer finished scrapes for the writer (in the order given) and wake it."""
        now = self._clock()
        self._buffer.extend(_Pending(record, now) for record in records)
        # NOTE: the bound is applied after each write attempt (a database that has just come
        # back takes the backlog and the new scrapes); twice the bound is the most kept
        # while a write hangs.
        if len(self._buffer) > 2 * self.max_buffered_scrapes:
            self._trim()
        self.metrics.buffered_scrapes.set(self.num_buffered)
        if self._arrived is not None:
            self._arrived.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Write what is buffered as it arrives until ``stop`` is set, then once more (what
        the database does not take then stays buffered, for :meth:`save`)."""
        self._arrived = arrived = asyncio.Event()
        try:
            while not stop.is_set():
                if not self._buffer:
                    await _first(arrived.wait(), stop.wait())
                    arrived.clear()
                    continue
                arrived.clear()
                if not await self.flush():  # the database is unavailable: wait, then retry
                    await wait_for_event(stop, self.retry_seconds)
            await self.flush()
        finally:
            self._arrived = None

    async def flush(self) -> bool:
        """Write everything buffered, oldest first; ``False`` when an error stopped it (the
        rest stays buffered). The buffer's bound is applied afterwards."""
        try:
            return await self._write_buffered()
        finally:
            self._trim()
            self.metrics.buffered_scrapes.set(self.num_buffered)

    async def _write_buffered(self) -> bool:
        # NOTE: stop at the first database error: the database is most likely down, and
        # writing later scrapes first would not lose them but would reorder the retries.
        # A batch the store refuses (one of its scrapes holds a series twice) is written
        # again one scrape at a time, so that only the offending scrape is dropped. The batch
        # in flight is off the buffer (back at its head if not stored), so trimming the
        # buffer never touches it.
        write_many = getattr(self.store, "write_scrapes", None)
        singles = 0  # scrapes still to write one at a time after a refused batch
        while self._buffer:
            size = 1 if singles or write_many is None else max(1, self.write_batch_size)
            batch = self._in_flight = [
                self._buffer.popleft() for _ in range(min(size, len(self._buffer)))
            ]
            records = [entry.record for entry in batch]
            started = time.perf_counter()
            try:
                if write_many is None:  # a store with the one-scrape API only
                    written = [await asyncio.to_thread(self.store.write_scrape, records[0])]  # type: ignore[attr-defined]
                else:
                    written = await asyncio.to_thread(write_many, records)
            except ValueError as error:  # refused for good, e.g. DuplicateSeriesError
                self._in_flight = []
                if len(batch) > 1:
                    self._buffer.extendleft(reversed(batch))
                    singles = len(batch)
                    continue
                singles = max(0, singles - 1)
                self.metrics.dropped_scrapes.labels(DROPPED_REJECTED).inc()
                logger.error("store refused the scrape of %s: %s", records[0].target, error)
                continue
            except BaseException as error:
                # NOTE: SQLAlchemy errors (the database is down, locked, unreachable) are
                # expected; anything else is a bug, logged in full, and the scrapes are kept
                # and retried all the same rather than lost with a dead writer.
                self._in_flight = []
                self._buffer.extendleft(reversed(batch))
                for entry in batch:
                    entry.is_retried = True
                if not isinstance(error, Exception):  # cancelled: the scrapes stay buffered
                    raise
                self.metrics.write_latency_seconds.observe(time.perf_counter() - started)
                self.metrics.write_errors.inc()
                if isinstance(error, SQLAlchemyError):
                    logger.warning(
                        "database write failed, %d scrape(s) buffered: %s",
                        len(self._buffer), _first_line(error),
                    )  # fmt: skip
                else:
                    logger.exception("writing %d scrape(s) failed unexpectedly", len(batch))
                return False
            self._in_flight = []
            self.metrics.write_latency_seconds.observe(time.perf_counter() - started)
            singles = max(0, singles - len(batch))
            committed = self._clock()
            for entry, is_new in zip(batch, written, strict=True):
                record = entry.record
                if entry.handed_at is not None:
                    self.metrics.write_delay_seconds.observe(max(0.0, committed - entry.handed_at))
                # NOTE: "already stored" after a failed attempt means that attempt committed
                # and only its reply was lost: its samples were ingested, by us, and count now.
                if is_new or entry.is_retried:
                    num = len(record.samples) + len(record.histograms) + len(record.raw)
                    self.metrics.samples_ingested.labels(record.target).inc(num)
            if self._on_stored is not None:
                self._on_stored(records)
        return True

    def _trim(self) -> None:
        while len(self._buffer) > self.max_buffered_scrapes:
            dropped = self._buffer.popleft().record
            self.metrics.dropped_scrapes.labels(DROPPED_BUFFER_FULL).inc()
            logger.warning(
                "write buffer full (%d scrapes): dropped the oldest, %s at %.3f",
                self.max_buffered_scrapes, dropped.target, dropped.timestamp_seconds,
            )  # fmt: skip

    def save(self, path: str | os.PathLike[str]) -> int:
        """Write the scrapes still buffered to ``path`` for a restarted collector
        (:meth:`load`); returns how many. With an empty buffer nothing is written and a stale
        file is removed (``collectors.spill``)."""
        if not self._buffer:
            Path(path).unlink(missing_ok=True)
            return 0
        spill.save(path, BUFFER_FILE_FORMAT, [entry.record for entry in self._buffer])
        logger.warning(
            "%d buffered scrape(s) not yet in the store saved to %s; the next start writes them",
            len(self._buffer), path,
        )  # fmt: skip
        return len(self._buffer)

    def load(self, path: str | os.PathLike[str]) -> int:
        """Put the scrapes a previous run saved with :meth:`save` ahead of everything
        buffered, oldest first, and remove the file; returns how many. A file that cannot be
        read is moved aside to ``<path>.unreadable`` (kept for inspection) and logged."""
        try:
            records = spill.load(path, BUFFER_FILE_FORMAT, ScrapeRecord)
        except spill.UnreadableSpillError as error:
            logger.error("cannot read saved scrapes %s", error)
            return 0
        if records is None:
            return 0
        self._buffer.extendleft(_Pending(record, None) for record in reversed(records))
        self._trim()
        self.metrics.buffered_scrapes.set(self.num_buffered)
        logger.info("%d scrape(s) saved by the previous run queued for writing", len(records))
        if self._arrived is not None:
            self._arrived.set()
        return len(records)


async def _first(*waits: Awaitable[object]) -> None:
    """Wait until the first of ``waits`` is done; cancel the others."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__
