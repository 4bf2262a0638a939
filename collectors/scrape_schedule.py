"""Each target on its own schedule, as Prometheus's scrape loops run.

A target's slot ``k`` starts at ``first_slot + k × interval``, where ``first_slot`` is the
start plus a phase offset fixed by the target's name (so a fleet's scrapes spread over the
interval, and a restarted collector keeps each target's phase). One loop per target: it
waits for its slot, scrapes, hands the finished scrape over at once (the writer batches), and
waits for its next slot. A scrape that is still running when its next slot comes (it overran)
makes the loop skip the slots it missed rather than scrape back to back, and the loop reports
the skip; no loop ever waits for another, so one target's latency delays no other's scrape or
write.
"""

from __future__ import annotations

import asyncio
import logging
import math
import zlib
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from collectors.event_wait import wait_for_event
from collectors.store.records import ScrapeRecord

logger = logging.getLogger("tailwatch.collector")


def phase_offset_seconds(name: str, interval_seconds: float) -> float:
    """The target's offset in ``[0, interval_seconds)`` from the start, stable across runs.

    NOTE: Prometheus derives the offset from a hash of the target too (``scrape.offset``);
    CRC-32 is enough to spread names evenly and is the same in every process (``hash()``
    of a ``str`` is salted per process)."""
    digest = zlib.crc32(name.encode("utf-8", "surrogatepass"))
    return digest / 2**32 * interval_seconds


def first_slot(start: float, offset_seconds: float, now: float, interval_seconds: float) -> float:
    """The first slot of the phase ``start + offset + k × interval`` (``k`` a whole number
    >= 0) that is not before ``now``: where a loop started at ``now`` begins."""
    elapsed = max(0.0, now - start - offset_seconds)
    return start + offset_seconds + -(-elapsed // interval_seconds) * interval_seconds


class Slot(NamedTuple):
    """Where a loop goes after a scrape: the start of its next slot, and how many slots it
    skipped because the scrape ended after they began (0 when it kept to its schedule)."""

    start: float
    num_skipped: int


class SlotReport(NamedTuple):
    """How one scheduled scrape went, in ``clock`` seconds: how long it took, how long after
    its slot began it ended (the start may come late on a busy event loop), and how many
    slots it skipped by ending after they began (0: on schedule)."""

    took_seconds: float
    ended_after_slot_seconds: float
    num_skipped: int


def next_slot(slot_start: float, now: float, interval_seconds: float) -> Slot:
    """The next slot after the one that began at ``slot_start``, given that the scrape ended
    at ``now``: ``slot_start + interval``, or, when ``now`` is past that, the first slot of
    the same phase after ``now`` (the ones in between are skipped). No drift: every start is
    ``slot_start + n × interval`` for a whole ``n``."""
    following = slot_start + interval_seconds
    if not now > following:
        return Slot(following, 0)
    num_skipped = math.floor((now - following) / interval_seconds) + 1
    return Slot(following + num_skipped * interval_seconds, num_skipped)


class ScrapeLoop:
    """Scrapes one target slot after slot until ``stop`` is set or the task is cancelled.

    ``name`` names the target in log lines; ``scrape()`` is one scrape (it bounds itself: the scraper's timeout); ``on_record`` gets
    each finished scrape at once; ``on_slot`` gets a :class:`SlotReport` after it. ``clock`` is
    monotonic seconds; waits are real (``asyncio``), so tests compress the interval.
    """

    def __init__(
        self,
        name: str,
        scrape: Callable[[], Awaitable[ScrapeRecord | None]],
        on_record: Callable[[ScrapeRecord], None],
        on_slot: Callable[[SlotReport], None],
        interval_seconds: float,
        first_slot: float,
        clock: Callable[[], float],
    ) -> None:
        self.name = name
        self._scrape = scrape
        self._on_record = on_record
        self._on_slot = on_slot
        self.interval_seconds = interval_seconds
        self.slot_start = first_slot
        self._clock = clock

    async def run(self, stop: asyncio.Event) -> None:
        """Scrape each slot; a scrape in flight when ``stop`` is set finishes (bounded by
        its timeout) and is handed over before the loop returns."""
        while not stop.is_set():
            wait = self.slot_start - self._clock()
            if wait > 0 and await wait_for_event(stop, wait):
                return
            started = self._clock()
            try:
                record = await self._scrape()
                if record is not None:
                    self._on_record(record)
            except Exception:
                # NOTE: a bug met in one scrape must not end this target's collection for
                # good (a dead task says nothing): logged in full, and the next slot comes.
                logger.exception("scrape loop of %s: unexpected error", self.name)
            now = self._clock()
            slot = next_slot(self.slot_start, now, self.interval_seconds)
            report = SlotReport(now - started, now - self.slot_start, slot.num_skipped)
            self.slot_start = slot.start
            self._on_slot(report)
