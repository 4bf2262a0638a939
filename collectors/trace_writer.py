"""The OTLP receiver's sink in ``tailwatch collect``: a bounded queue on the event loop,
drained into the store by a writer task through ``asyncio.to_thread``, retrying while the
database is unavailable, flushed on close (and saved for the next start when the database
stays down, ``collectors.spill``)."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
import time
from collections import deque
from pathlib import Path

from prometheus_client import CollectorRegistry

from collectors import spill
from collectors.collector_metrics import (
    DROPPED_QUEUE_FULL,
    DROPPED_REJECTED,
    DROPPED_SHUTDOWN,
    TraceMetrics,
)
from collectors.error_text import first_line
from collectors.event_wait import wait_for_event
from collectors.otlp import ReceiverBusy
from collectors.request_records import RequestRecord, SpanRecord, request_records
from collectors.store.protocols import TraceStore

logger = logging.getLogger(__name__)


#: Spans the writer's queue holds before the receiver answers 503.
DEFAULT_MAX_QUEUED_SPANS = 100_000
#: Seconds ``TraceWriter.close`` keeps retrying an unavailable database before it gives up.
DEFAULT_FLUSH_TIMEOUT_SECONDS = 10.0
#: The first item of a file of spans saved at shutdown (``TraceWriter(spill_path=...)``).
SPILL_FORMAT = "tailwatch-trace-queue-v1"
_RETRY_INITIAL_SECONDS, _RETRY_MAX_SECONDS = 0.1, 5.0


def is_transient(error: BaseException) -> bool:
    """A database error that retrying may fix: unreachable, locked, a dropped connection."""
    from sqlalchemy import exc

    if isinstance(error, exc.OperationalError | exc.InterfaceError | exc.DisconnectionError):
        return True
    if isinstance(error, exc.TimeoutError):  # the connection pool's
        return True
    return isinstance(error, exc.DBAPIError) and error.connection_invalidated


class TraceWriter:
    """The receiver's sink for ``tailwatch collect``: spans wait in a bounded queue and a
    writer task stores them (``store.write_spans`` then ``store.write_requests``, one export
    per transaction) in a worker thread, so database I/O never blocks the event loop.

    - **Back-pressure.** ``on_spans`` raises :class:`ReceiverBusy` (503, ``Retry-After``)
      when the export would take the queue past ``max_queued_spans`` (an export larger than
      the bound is still taken into an empty queue); the exporter retries it later. Refused
      spans are counted as dropped (``queue_full``) and logged once per full spell.
    - **Retries.** A transient database error (:func:`is_transient`) is retried, backing
      off from 0.1 s to 5 s, for as long as it lasts: the queue fills meanwhile and the
      receiver answers 503. Writes are idempotent, so a retried export is stored once. Any
      other error drops that export (``rejected``), logged with its traceback.
    - **Shutdown.** ``close`` refuses new exports, writes everything queued and waits for
      the writer; if the database stays unavailable past ``flush_timeout_seconds`` the rest
      is dropped (``shutdown``), counted and logged as an error.

    ``on_spans`` must be called on the loop that runs ``start`` (the receiver's), or from
    another thread: the queue is guarded by a lock.
    """

    def __init__(
        self,
        store: TraceStore,
        registry: CollectorRegistry,
        *,
        max_queued_spans: int = DEFAULT_MAX_QUEUED_SPANS,
        flush_timeout_seconds: float = DEFAULT_FLUSH_TIMEOUT_SECONDS,
        retry_initial_seconds: float = _RETRY_INITIAL_SECONDS,
        retry_max_seconds: float = _RETRY_MAX_SECONDS,
        spill_path: str | os.PathLike[str] | None = None,
    ) -> None:
        if max_queued_spans < 1:
            raise ValueError(f"max_queued_spans={max_queued_spans!r}: must be >= 1")
        self.store = store
        self.metrics = TraceMetrics(registry)
        self.max_queued_spans = max_queued_spans
        self.flush_timeout_seconds = flush_timeout_seconds
        self._retry = (retry_initial_seconds, retry_max_seconds)
        #: Where ``close`` saves what the database did not take, for the next start.
        self.spill_path = None if spill_path is None else Path(spill_path)
        self._queue: deque[tuple[list[SpanRecord], list[RequestRecord]]] = deque()
        self._queued_spans = 0
        self._lock = threading.Lock()
        self._refused = 0  # spans refused in the current full spell
        self._closing = False
        self._deadline = math.inf
        self._flush_timeout = flush_timeout_seconds
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def num_queued_spans(self) -> int:
        return self._queued_spans

    # -- the receiver's side ----------------------------------------------------------------

    def on_spans(self, spans: list[SpanRecord]) -> None:
        """Queue one export's spans and their request records, or raise ReceiverBusy."""
        with self._lock:
            if self._closing:
                raise ReceiverBusy("the collector is shutting down; retry")
            queued = self._queued_spans
            if queued and queued + len(spans) > self.max_queued_spans:
                self.metrics.spans_dropped.labels(DROPPED_QUEUE_FULL).inc(len(spans))
                if not self._refused:
                    logger.warning(
                        "trace queue full (%d spans waiting for the store): refusing exports "
                        "with 503 until it drains",
                        queued,
                    )
                self._refused += len(spans)
                raise ReceiverBusy(
                    f"the collector's trace queue is full ({queued} spans); retry later"
                )
            if self._refused:
                logger.info(
                    "trace queue accepting again; %d spans were refused with 503", self._refused
                )
                self._refused = 0
            self._queue.append((spans, request_records(spans)))
            self._queued_spans += len(spans)
        self.metrics.spans_received.inc(len(spans))
        self.metrics.queued_spans.set(self._queued_spans)
        self._notify()

    def _notify(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is None or wake is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            wake.set()
        else:
            loop.call_soon_threadsafe(wake.set)

    # -- the writer's side ------------------------------------------------------------------

    def start(self) -> None:
        """Start the writer task on the running loop."""
        if self._task is not None:
            raise RuntimeError("the trace writer is already started")
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._load_spill()
        self._task = asyncio.create_task(self._run(), name="trace-writer")

    def _load_spill(self) -> None:
        """Queue, ahead of any export, the spans a previous run saved at shutdown."""
        if self.spill_path is None:
            return
        try:
            items = spill.load(self.spill_path, SPILL_FORMAT, tuple)
        except spill.UnreadableSpillError as error:
            logger.error("cannot read saved spans %s", error)
            return
        if items is None:
            return
        with self._lock:
            self._queue.extendleft(reversed(items))
            self._queued_spans += sum(len(spans) for spans, _ in items)
        self.metrics.queued_spans.set(self._queued_spans)
        logger.info("%d span(s) saved by the previous run queued for writing", self._queued_spans)

    async def close(self, timeout_seconds: float | None = None) -> None:
        """Refuse new exports, write what is queued, and stop the writer. Returns once the
        queue is empty: written, or dropped after ``timeout_seconds`` (default
        ``flush_timeout_seconds``) of an unavailable database."""
        timeout = self.flush_timeout_seconds if timeout_seconds is None else timeout_seconds
        self._flush_timeout = timeout
        with self._lock:
            self._closing = True
        self._deadline = time.monotonic() + timeout
        if self._task is None:  # never started: write here
            self.start()
        assert self._wake is not None and self._task is not None
        self._wake.set()
        await self._task

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            with self._lock:
                item = self._queue[0] if self._queue else None
                closing = self._closing
            if item is None:
                if closing:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._write(*item)
            with self._lock:
                if self._queue and self._queue[0] is item:
                    self._queue.popleft()
                    self._queued_spans -= len(item[0])
            self.metrics.queued_spans.set(self._queued_spans)

    async def _write(self, spans: list[SpanRecord], records: list[RequestRecord]) -> None:
        """Store one export, retrying transient errors; drops it (counted, logged) when the
        store refuses it or when closing and the flush deadline has passed."""
        delay, max_delay = self._retry
        failures = 0
        while True:
            try:
                # NOTE: counted per export, not per new row: a retry after a lost commit
                # reply finds its rows stored and still counts them once, so received =
                # stored + dropped (rejected, shutdown) + queued.
                await asyncio.to_thread(self.store.write_spans, spans)
                if records:
                    await asyncio.to_thread(self.store.write_requests, records)
                self.metrics.spans_stored.inc(len(spans))
                self.metrics.request_records.inc(len(records))
                if failures:
                    logger.info("trace writes recovered after %d failed attempts", failures)
                return
            except Exception as error:
                self.metrics.trace_write_errors.inc()
                if not is_transient(error):
                    self.metrics.spans_dropped.labels(DROPPED_REJECTED).inc(len(spans))
                    logger.exception("the store refused %d spans; dropped them", len(spans))
                    return
                failures += 1
                if failures == 1:
                    logger.warning("trace write failed, retrying: %s", first_line(error))
                left = self._deadline - time.monotonic()
                if left <= 0:
                    self._drop_queue(error)
                    return
                await self._sleep(min(delay, left))
                delay = min(delay * 2, max_delay)

    async def _sleep(self, seconds: float) -> None:
        # NOTE: woken early by close(), so a shutdown never waits out a long back-off.
        assert self._wake is not None
        self._wake.clear()
        await wait_for_event(self._wake, seconds)

    def _drop_queue(self, error: BaseException) -> None:
        with self._lock:
            lost = self._queued_spans
            items = list(self._queue)
            self._queue.clear()
            self._queued_spans = 0
        self.metrics.queued_spans.set(0)
        if self.spill_path is not None and self._save(items):
            logger.warning(
                "shutting down with the database unavailable for %g s: saved %d queued spans "
                "to %s for the next start (%s)",
                self._flush_timeout, lost, self.spill_path, first_line(error),
            )  # fmt: skip
            return
        self.metrics.spans_dropped.labels(DROPPED_SHUTDOWN).inc(lost)
        logger.error(
            "shutting down with the database unavailable for %g s: dropped %d queued spans (%s)",
            self._flush_timeout,
            lost,
            first_line(error),
        )

    def _save(self, items: list[tuple[list[SpanRecord], list[RequestRecord]]]) -> bool:
        """Save ``items`` to ``spill_path`` (``collectors.spill``); False, logged, when that
        fails too."""
        assert self.spill_path is not None
        try:
            spill.save(self.spill_path, SPILL_FORMAT, items)
        except OSError as error:
            logger.error("cannot save queued spans to %s: %s", self.spill_path, error)
            return False
        return True
