"""What the collector knows of each target from its scrapes: up or down and why, overruns,
bucket-layout changes; as metrics, log lines (on change, not every scrape) and a status the
daemon serves (``GET /targets``)."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from collectors.collector_metrics import CollectorMetrics
from collectors.layout_changes import LayoutChange, LayoutTracker
from collectors.scrape_schedule import SlotReport
from collectors.store.records import ScrapeRecord
from slo.window import format_utc

logger = logging.getLogger("tailwatch.collector")


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
            "last_scrape": None if stamp is None else format_utc(stamp),
            "last_scrape_timestamp_seconds": stamp,
            "last_scrape_duration_seconds": self.last_scrape_duration_seconds,
            "last_error": self.last_error,
            "num_scrapes": self.num_scrapes,
            "num_skipped_scrapes": self.num_skipped_scrapes,
            "is_overrunning": self.is_overrunning,
            "num_layout_changes": self.num_layout_changes,
            "last_layout_change": None if change is None else change.to_json(),
        }


class TargetBook:
    """Each target's :class:`TargetStatus`, kept up to date from its scrapes and slots, and
    the per-target metrics in ``metrics``."""

    def __init__(self, metrics: CollectorMetrics, interval_seconds: float) -> None:
        self.metrics = metrics
        self.interval_seconds = interval_seconds
        self._status: dict[str, TargetStatus] = {}
        self._layouts = LayoutTracker()

    def statuses(self) -> list[TargetStatus]:
        return list(self._status.values())

    @property
    def last_errors(self) -> dict[str, str]:
        """The last scrape error per scraped target ("" once it scrapes again)."""
        return {name: s.last_error for name, s in self._status.items() if s.num_scrapes}

    def add(self, name: str, url: str) -> None:
        """A new target: its series visible (0) from the first ``/metrics`` on."""
        self.metrics.init_target(name)
        self._status[name] = TargetStatus(name, url, self.interval_seconds)

    def remove(self, name: str) -> None:
        """A removed target: its status, layouts and gauges go (its counters stay)."""
        self.metrics.remove_target(name)
        self._status.pop(name, None)
        self._layouts.forget(name)

    def observe(self, record: ScrapeRecord) -> None:
        """A finished scrape: ``target_up``, duration, errors, layout changes, status."""
        target = record.target
        self.metrics.target_up.labels(target).set(1 if record.is_up else 0)
        if record.duration_seconds is not None:
            self.metrics.scrape_duration_seconds.labels(target).set(record.duration_seconds)
        status = self._status_of(target)
        previous = status.last_error
        if not record.is_up:
            self.metrics.scrape_errors.labels(target).inc()
        self._update(
            target,
            health="up" if record.is_up else "down",
            last_scrape_timestamp_seconds=record.timestamp_seconds,
            last_scrape_duration_seconds=record.duration_seconds,
            last_error=record.error,
            num_scrapes=status.num_scrapes + 1,
        )
        # NOTE: logged on change only: a target down for an hour is one line, not 720.
        if record.error != previous:
            if record.is_up:
                logger.info("scrape of %s recovered", target)
            else:
                logger.warning("scrape of %s failed: %s", target, record.error)
        self._check_layouts(record)

    def _check_layouts(self, record: ScrapeRecord) -> None:
        changes = self._layouts.observe(record)
        if not changes:
            return
        self.metrics.layout_changes.labels(record.target).inc(len(changes))
        for change in changes:
            logger.warning("%s", change.describe())
        self._update(
            record.target,
            last_layout_change=changes[-1],
            num_layout_changes=self._status_of(record.target).num_layout_changes + len(changes),
        )

    def on_slot(self, target: str, report: SlotReport) -> None:
        """After each scheduled scrape: count and report the slots an overrun skipped."""
        status = self._status_of(target)
        if report.num_skipped:
            self.metrics.skipped_scrapes.labels(target).inc(report.num_skipped)
            # NOTE: logged when a target starts overrunning, not every slot while it does.
            if not status.is_overrunning:
                logger.warning(
                    "scrape of %s ended %.3f s after its slot began (it took %.3f s), past its "
                    "%g s interval: skipped %d scheduled scrape(s); it keeps its phase",
                    target, report.ended_after_slot_seconds, report.took_seconds,
                    self.interval_seconds, report.num_skipped,
                )  # fmt: skip
        elif status.is_overrunning:
            logger.info("scrape of %s is back on schedule", target)
        self._update(
            target,
            num_skipped_scrapes=status.num_skipped_scrapes + report.num_skipped,
            is_overrunning=report.num_skipped > 0,
        )

    def _status_of(self, target: str) -> TargetStatus:
        status = self._status.get(target)
        if status is None:  # NOTE: e.g. a scrape still in flight when its target was removed
            status = TargetStatus(target, "", self.interval_seconds)
        return status

    def _update(self, target: str, **changes: object) -> None:
        if target in self._status:
            self._status[target] = dataclasses.replace(self._status[target], **changes)  # type: ignore[arg-type]
