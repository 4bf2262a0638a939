"""The collector's own metrics: names in one place, built in the collector's own registry
(never the process-global one, so two collectors in one process, as in tests, do not clash).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

TARGET_UP = "tailwatch_collector_target_up"
SCRAPE_DURATION_SECONDS = "tailwatch_collector_scrape_duration_seconds"
SCRAPE_ERRORS = "tailwatch_collector_scrape_errors"  # exposed as ..._total
SAMPLES_INGESTED = "tailwatch_collector_samples_ingested"  # exposed as ..._total
WRITE_LATENCY_SECONDS = "tailwatch_collector_write_latency_seconds"
WRITE_ERRORS = "tailwatch_collector_write_errors"  # exposed as ..._total
BUFFERED_SCRAPES = "tailwatch_collector_buffered_scrapes"
DROPPED_SCRAPES = "tailwatch_collector_dropped_scrapes"  # exposed as ..._total

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
            WRITE_LATENCY_SECONDS, "Seconds one scrape's database write took (failed ones too).",
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
