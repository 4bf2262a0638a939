"""The collector's own metrics: names in one place, built in the collector's own registry
(never the process-global one, so two collectors in one process, as in tests, do not clash).
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

TARGET_UP = "tailwatch_collector_target_up"
SCRAPE_DURATION_SECONDS = "tailwatch_collector_scrape_duration_seconds"
SCRAPE_ERRORS = "tailwatch_collector_scrape_errors"  # exposed as ..._total
SAMPLES_INGESTED = "tailwatch_collector_samples_ingested"  # exposed as ..._total
WRITE_LATENCY_SECONDS = "tailwatch_collector_write_latency_seconds"
WRITE_ERRORS = "tailwatch_collector_write_errors"  # exposed as ..._total
BUFFERED_SCRAPES = "tailwatch_collector_buffered_scrapes"
DROPPED_SCRAPES = "tailwatch_collector_dropped_scrapes"  # exposed as ..._total
WRITE_DELAY_SECONDS = "tailwatch_collector_write_delay_seconds"
SKIPPED_SCRAPES = "tailwatch_collector_skipped_scrapes"  # exposed as ..._total
LAYOUT_CHANGES = "tailwatch_collector_layout_changes"  # exposed as ..._total

TARGET_LABEL = "target"
REASON_LABEL = "reason"
#: Why a scrape was dropped: the buffer was full (its oldest entry goes), or the store
#: refused it for good (e.g. a duplicated series, which retrying cannot fix).
DROPPED_BUFFER_FULL = "buffer_full"
DROPPED_REJECTED = "rejected"

WRITE_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class CollectorMetrics:
    """The collector's metric objects, registered in ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.target_up = Gauge(
            TARGET_UP, "1 if the last scrape of the target succeeded, else 0.",
            [TARGET_LABEL], registry=registry,
        )  # fmt: skip
        self.scrape_duration_seconds = Gauge(
            SCRAPE_DURATION_SECONDS, "Seconds the last scrape of the target took.",
            [TARGET_LABEL], registry=registry,
        )  # fmt: skip
        self.scrape_errors = Counter(
            SCRAPE_ERRORS, "Scrapes of the target that failed (down, timed out, garbage, too large).",
            [TARGET_LABEL], registry=registry,
        )  # fmt: skip
        self.samples_ingested = Counter(
            SAMPLES_INGESTED,
            "Series readings written to the store (samples, histograms and raw samples).",
            [TARGET_LABEL], registry=registry,
        )  # fmt: skip
        self.write_latency_seconds = Histogram(
            WRITE_LATENCY_SECONDS, "Seconds per write transaction (a batch of scrapes; failed too).",
            buckets=WRITE_LATENCY_BUCKETS, registry=registry,
        )  # fmt: skip
        self.write_errors = Counter(
            WRITE_ERRORS, "Database writes that failed; their scrapes stay buffered.",
            registry=registry,
        )  # fmt: skip
        self.buffered_scrapes = Gauge(
            BUFFERED_SCRAPES, "Scrapes waiting for the database to accept them.",
            registry=registry,
        )  # fmt: skip
        self.dropped_scrapes = Counter(
            DROPPED_SCRAPES, "Scrapes never written: buffer full (oldest dropped) or rejected.",
            [REASON_LABEL], registry=registry,
        )  # fmt: skip
        self.write_delay_seconds = Histogram(
            WRITE_DELAY_SECONDS,
            "Seconds from a scrape's end to the commit of the transaction that stored it.",
            buckets=WRITE_LATENCY_BUCKETS, registry=registry,
        )  # fmt: skip
        self.skipped_scrapes = Counter(
            SKIPPED_SCRAPES,
            "Scheduled scrapes of the target not made because its previous scrape was still "
            "running when they were due (it overran its interval).",
            [TARGET_LABEL], registry=registry,
        )  # fmt: skip
        self.layout_changes = Counter(
            LAYOUT_CHANGES,
            "Histogram series of the target whose bucket edges (le) changed between scrapes.",
            [TARGET_LABEL], registry=registry,
        )  # fmt: skip

    def init_target(self, name: str) -> None:
        """Make every per-target series visible (0) before the target's first scrape."""
        self.target_up.labels(name).set(0)
        for counter in (
            self.scrape_errors, self.samples_ingested, self.skipped_scrapes, self.layout_changes
        ):  # fmt: skip
            counter.labels(name)

    def remove_target(self, name: str) -> None:
        """A removed target's gauges go (a stale ``target_up`` would still read as up or
        down); its counters stay."""
        for gauge in (self.target_up, self.scrape_duration_seconds):
            with contextlib.suppress(KeyError):
                gauge.remove(name)


# -- traces (the OTLP receiver's queue and writer, collectors/otlp.py) -----------------------

SPANS_RECEIVED = "tailwatch_collector_spans_received"  # exposed as ..._total
SPANS_STORED = "tailwatch_collector_spans_stored"  # exposed as ..._total
REQUEST_RECORDS = "tailwatch_collector_request_records"  # exposed as ..._total
SPANS_DROPPED = "tailwatch_collector_spans_dropped"  # exposed as ..._total
TRACE_WRITE_ERRORS = "tailwatch_collector_trace_write_errors"  # exposed as ..._total
QUEUED_SPANS = "tailwatch_collector_queued_spans"

#: Why spans were not stored: the queue was full (the export was refused with 503, which
#: the exporter retries), the store refused them for good (``DROPPED_REJECTED``), or the
#: database stayed unavailable past the flush timeout at shutdown.
DROPPED_QUEUE_FULL = "queue_full"
DROPPED_SHUTDOWN = "shutdown"


class TraceMetrics:
    """The trace writer's metric objects, registered in ``registry`` (the collector's)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.spans_received = Counter(
            SPANS_RECEIVED, "Spans in OTLP exports the receiver accepted (answered 200).",
            registry=registry,
        )  # fmt: skip
        self.spans_stored = Counter(
            SPANS_STORED,
            "Spans of accepted exports written to the store (ones it already held included, "
            "as spans_received counts a retried export again).",
            registry=registry,
        )  # fmt: skip
        self.request_records = Counter(
            REQUEST_RECORDS,
            "Request records derived from accepted exports and written to the store.",
            registry=registry,
        )  # fmt: skip
        self.spans_dropped = Counter(
            SPANS_DROPPED,
            "Spans not stored: queue_full (export refused with 503, the exporter retries), "
            "rejected (the store refused them), shutdown (database down at shutdown).",
            [REASON_LABEL], registry=registry,
        )  # fmt: skip
        self.trace_write_errors = Counter(
            TRACE_WRITE_ERRORS, "Span or request record writes that failed (retried or dropped).",
            registry=registry,
        )  # fmt: skip
        self.queued_spans = Gauge(
            QUEUED_SPANS, "Spans accepted and waiting to be written to the store.",
            registry=registry,
        )  # fmt: skip
        for reason in (DROPPED_QUEUE_FULL, DROPPED_REJECTED, DROPPED_SHUTDOWN):
            self.spans_dropped.labels(reason)


# -- targets file and GPU telemetry ----------------------------------------------------------

TARGETS = "tailwatch_collector_targets"
TARGETS_FILE_ERRORS = "tailwatch_collector_targets_file_errors"  # exposed as ..._total
TARGETS_FILE_VALID = "tailwatch_collector_targets_file_valid"
GPU_TELEMETRY_AVAILABLE = "tailwatch_collector_gpu_telemetry_available"


class SourceMetrics:
    """Where the target list comes from, and whether GPU telemetry is read."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.targets = Gauge(
            TARGETS, "Targets scraped each cycle (static, from the targets file, and NVML).",
            registry=registry,
        )  # fmt: skip
        self.targets_file_errors = Counter(
            TARGETS_FILE_ERRORS,
            "Changes of the targets file that could not be used (missing, bad YAML/JSON, a bad "
            "entry, a duplicated name); the previous good list is kept.",
            registry=registry,
        )  # fmt: skip
        self.targets_file_valid = Gauge(
            TARGETS_FILE_VALID, "1 if the targets file's current content is in use, else 0.",
            registry=registry,
        )  # fmt: skip
        self.gpu_telemetry_available = Gauge(
            GPU_TELEMETRY_AVAILABLE, "1 if GPU readings come from NVML, else 0 (see the log).",
            registry=registry,
        )  # fmt: skip


# -- store maintenance (roll-ups and retention, run by the daemon) ---------------------------

MAINTENANCE_RUNS = "tailwatch_store_maintenance_runs"  # exposed as ..._total
MAINTENANCE_ERRORS = "tailwatch_store_maintenance_errors"  # exposed as ..._total
MAINTENANCE_LAST_SUCCESS = "tailwatch_store_maintenance_last_success_timestamp_seconds"
ROLLED_UP_SCRAPES = "tailwatch_store_rolled_up_scrapes"  # exposed as ..._total
DELETED_ROWS = "tailwatch_store_deleted"  # exposed as ..._total, by ``kind``
KIND_LABEL = "kind"


class MaintenanceMetrics:
    """What ``Store.maintain`` did in the daemon: a stale last-success timestamp or growing
    errors mean roll-ups and retention have stopped (and the database will grow)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.runs = Counter(
            MAINTENANCE_RUNS, "Store.maintain calls (roll-ups and retention).",
            registry=registry,
        )  # fmt: skip
        self.errors = Counter(
            MAINTENANCE_ERRORS, "Store.maintain calls that failed (retried next interval).",
            registry=registry,
        )  # fmt: skip
        self.last_success = Gauge(
            MAINTENANCE_LAST_SUCCESS, "Unix time of the last Store.maintain call that succeeded.",
            registry=registry,
        )  # fmt: skip
        self.rolled_up = Counter(
            ROLLED_UP_SCRAPES, "Scrapes rolled up into 1-minute roll-ups.", registry=registry
        )
        self.deleted = Counter(
            DELETED_ROWS,
            "Rows past their retention deleted: raw_scrapes (with their samples), rollups, "
            "spans, request_records, alert_transitions, incidents, rule_failures, notified, "
            "silences.",
            [KIND_LABEL], registry=registry,
        )  # fmt: skip
        for kind in (
            "raw_scrapes", "rollups", "spans", "request_records",
            "alert_transitions", "incidents", "rule_failures", "notified", "silences",
        ):  # fmt: skip
            self.deleted.labels(kind)
