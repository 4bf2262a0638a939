"""What maintenance keeps and how much one call may do (:class:`RetentionPolicy`, validated
once, at the edge), and what a call did (:class:`MaintenanceReport`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_RAW_RETENTION_SECONDS = 48 * 3600.0
DEFAULT_ROLLUP_RETENTION_SECONDS = 30 * 86400.0
#: Spans (whole traces) are kept 14 days, as Grafana Tempo keeps blocks by default; request
#: records, which goodput over SLO windows needs, as long as the roll-ups.
DEFAULT_SPAN_RETENTION_SECONDS = 14 * 86400.0
#: The evaluator's history (transitions, resolved incidents, rule failures, notifier memory,
#: and the change events triage reads) is kept 30 days, as long as the roll-ups its incidents are triaged from.
DEFAULT_ALERT_RETENTION_SECONDS = 30 * 86400.0
MIN_RETENTION_SECONDS = 600.0


@dataclass(frozen=True)
class RetentionPolicy:
    """How long data is kept and how much one :meth:`collectors.store.Store.maintain` call may do.

    ``rollup_lag_seconds``: a minute is rolled up once ``now`` is this far past its end, so
    that its last scrapes have arrived (only an economy: later data is rolled up again).
    ``settle_seconds``: how long a database transaction may stay in flight; a scrape id is
    treated as final (no lower id can still commit) this long after it was seen.
    """

    raw_retention_seconds: float = DEFAULT_RAW_RETENTION_SECONDS
    rollup_retention_seconds: float = DEFAULT_ROLLUP_RETENTION_SECONDS
    rollup_lag_seconds: float = 10.0
    settle_seconds: float = 30.0
    max_scrapes_per_call: int = 5000
    max_deleted_scrapes_per_call: int = 5000
    max_rollup_minutes_deleted_per_call: int = 10
    span_retention_seconds: float = DEFAULT_SPAN_RETENTION_SECONDS
    max_trace_rows_deleted_per_call: int = 20000
    alert_retention_seconds: float = DEFAULT_ALERT_RETENTION_SECONDS
    max_alert_rows_deleted_per_call: int = 20000

    def __post_init__(self) -> None:
        # NOTE: raw rows must outlive the roll-up lag and settling by a few minutes, or
        # scrapes would pass the raw retention before they are rolled up (and be dropped).
        for name in (
            "raw_retention_seconds",
            "rollup_retention_seconds",
            "span_retention_seconds",
            "alert_retention_seconds",
        ):
            value = getattr(self, name)
            if not (
                isinstance(value, int | float)
                and math.isfinite(value)
                and value >= MIN_RETENTION_SECONDS
            ):
                raise ValueError(
                    f"{name}: expected a number of seconds >= {MIN_RETENTION_SECONDS:g}, "
                    f"got {value!r}"
                )
        for name in ("rollup_lag_seconds", "settle_seconds"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name}: expected a number of seconds >= 0, got {value!r}")
        for name in (
            "max_scrapes_per_call",
            "max_deleted_scrapes_per_call",
            "max_rollup_minutes_deleted_per_call",
            "max_trace_rows_deleted_per_call",
            "max_alert_rows_deleted_per_call",
        ):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")


@dataclass(frozen=True)
class MaintenanceReport:
    """What one :meth:`collectors.store.Store.maintain` call did. ``more_to_do``: a batch limit was
    reached (call again soon); otherwise everything due at ``now`` is done."""

    scrapes_rolled_up: int = 0
    late_scrapes: int = 0
    dropped_late_scrapes: int = 0
    recounted: bool = False
    series_recomputed: int = 0
    rollup_rows_written: int = 0
    raw_scrapes_deleted: int = 0
    rollup_rows_deleted: int = 0
    spans_deleted: int = 0
    request_records_deleted: int = 0
    alert_transitions_deleted: int = 0
    incidents_deleted: int = 0
    rule_failures_deleted: int = 0
    notified_deleted: int = 0
    silences_deleted: int = 0
    change_events_deleted: int = 0
    more_to_do: bool = False
