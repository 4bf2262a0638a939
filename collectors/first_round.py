"""The collection's first round: whether every target it started with has a scrape in the
store yet (a down target's failed scrape counts: it is stored too).

The alert evaluator inside ``tailwatch collect`` waits for it before its first evaluation, so
that evaluation already sees every configured target: started at once, it evaluated before
anything was stored and raised ``metric-absent`` for every family, pending for one
evaluation (docs/up.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from collectors.store.records import ScrapeRecord


class FirstRound:
    """The targets of the first round still without a stored scrape, and :attr:`stored`,
    set once there are none. The round's targets are the first ones :meth:`track` is given;
    a later :meth:`track` only drops those no longer scraped (a target taken out of the
    targets file before its first scrape was stored is no longer waited for), so a target
    added later never holds the round back. All methods run on the collector's event loop."""

    def __init__(self) -> None:
        self.stored = asyncio.Event()
        self._waiting: set[str] | None = None  # None: the collection has not started

    @property
    def waiting(self) -> tuple[str, ...]:
        """The round's targets with no stored scrape yet, sorted (empty before it begins)."""
        return tuple(sorted(self._waiting or ()))

    def track(self, targets: Iterable[str]) -> None:
        """The names of the targets scraped now: the round's on the first call (no targets
        at all: the round is complete at once)."""
        names = set(targets)
        if self._waiting is None:
            self._waiting = names
        else:
            self._waiting &= names
        self._check()

    def on_stored(self, records: Iterable[ScrapeRecord]) -> None:
        """Scrapes the store now holds (written now, or found already written)."""
        if self._waiting is None:
            return  # NOTE: a previous run's saved scrapes, written before the round began
        self._waiting.difference_update(record.target for record in records)
        self._check()

    def _check(self) -> None:
        if self._waiting is not None and not self._waiting:
            self.stored.set()

    async def wait(self, stop: asyncio.Event, timeout_seconds: float) -> bool:
        """Wait until the round is stored, ``stop`` is set, or ``timeout_seconds`` have
        passed; whether the round is stored. A ``timeout_seconds`` <= 0 only looks."""
        if not self.stored.is_set() and timeout_seconds > 0:
            waits = [asyncio.ensure_future(e.wait()) for e in (self.stored, stop)]
            try:
                await asyncio.wait(
                    waits, timeout=timeout_seconds, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                for waiting in waits:
                    waiting.cancel()
        return self.stored.is_set()
