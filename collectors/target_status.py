"""What the collector knows of each target, as its daemon reports it (``GET /targets``)."""

from __future__ import annotations

from dataclasses import dataclass

from collectors.layout_changes import LayoutChange, format_time


@dataclass(frozen=True)
class TargetStatus:
    """One target's latest state. ``health`` is ``unknown`` until its first scrape ends."""

    target: str
    url: str
    interval_seconds: float
    health: str = "unknown"  # up, down, unknown
    last_scrape_timestamp_seconds: float | None = None
    last_scrape_duration_seconds: float | None = None
    last_error: str = ""
    num_scrapes: int = 0
    #: Slots skipped because a scrape was still running when they were due (it overran).
    num_skipped_scrapes: int = 0
    #: True from an overrun until a scrape ends within its slot again.
    is_overrunning: bool = False
    last_layout_change: LayoutChange | None = None
    num_layout_changes: int = 0

    def to_json(self) -> dict[str, object]:
        stamp = self.last_scrape_timestamp_seconds
        change = self.last_layout_change
        return {
            "target": self.target,
            "url": self.url,
            "health": self.health,
            "interval_seconds": self.interval_seconds,
            "last_scrape": None if stamp is None else format_time(stamp),
            "last_scrape_timestamp_seconds": stamp,
            "last_scrape_duration_seconds": self.last_scrape_duration_seconds,
            "last_error": self.last_error,
            "num_scrapes": self.num_scrapes,
            "num_skipped_scrapes": self.num_skipped_scrapes,
            "is_overrunning": self.is_overrunning,
            "num_layout_changes": self.num_layout_changes,
            "last_layout_change": None if change is None else change.to_json(),
        }
