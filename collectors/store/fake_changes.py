"""``MemoryChanges``: the :class:`~collectors.store.protocols.ChangeStore` and
:class:`~collectors.store.protocols.ChangeReader` in memory, for the virtual fleet and tests.
Same identity, order and checks as the SQL store (``tests/collectors/test_change_events.py``
holds the two to the same answers)."""

from __future__ import annotations

from collections.abc import Sequence

from collectors.store.change_records import ChangeEvent, check_limit, check_range, newest


class MemoryChanges:
    def __init__(self, events: Sequence[ChangeEvent] = ()) -> None:
        self._events: dict[tuple, ChangeEvent] = {}
        self.write_change_events(events)

    def write_change_events(self, events: Sequence[ChangeEvent]) -> int:
        new = 0
        for event in events:
            if event.key not in self._events:
                self._events[event.key] = event
                new += 1
        return new

    def change_events(
        self, start: float, end: float, *, target: str | None = None, limit: int = 1000
    ) -> list[ChangeEvent]:
        check_range(start, end)
        check_limit(limit)
        chosen = [
            e
            for e in self._events.values()
            if start <= e.at_seconds <= end and (target is None or e.target == target)
        ]
        return newest(chosen, limit)
