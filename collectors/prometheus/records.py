"""The fleet histograms ``tailwatch rules export`` records for the console, and how the reader
reads them: one vocabulary for the writer (``alerts/export``) and the reader, so that a record
cannot be written under one name and looked for under another.

``tailwatch:fleet_<family>_bucket:rate5m`` is ``sum by (le, model, tenant) (rate(<engine
metric>_bucket[5m]))`` with the engine's model label renamed to ``model``;
``tailwatch:fleet_<family>_sum:rate5m`` the same of ``_sum``. A day of a 500-replica fleet's
bucket series is 7,500 series of samples a latency family; the record is one series a bucket
(per model and tenant). The console's fleet percentiles read it where it answers every step
of a chart (``PrometheusReader.recorded_histogram_series``): each step's histogram is the
record's mean rate over the step times the step (Grafana's reading of a recorded rate), not
the exact increase the engines' series give, and the page says which it shows.

The Overview's counters and gauges are recorded the same way, per model and tenant (and the
label a chart breaks a counter down by): ``tailwatch:fleet_<family>:rate5m`` is ``sum by
(model, tenant[, finished_reason | code]) (rate(<counter>[5m]))``, and
``tailwatch:fleet_<family>:sum`` (``:max``) the ``sum`` (``max``) of a gauge by model and
tenant. At 500 replicas a day of the request counter is 2,000 series; its record is four.
"""

from __future__ import annotations

from collectors import canonical as c

#: The families the console charts as fleet percentiles.
FAMILIES = (c.TTFT_SECONDS, c.ITL_SECONDS, c.E2E_SECONDS, c.QUEUE_SECONDS)
#: The window of the recorded rate, seconds (a chart's step must be at least this).
RATE_SECONDS = 300.0
#: The labels a record keeps besides ``le`` (canonical names): a selector on any other label
#: (a replica) is read from the engines' series.
KEPT_LABELS = (c.LABEL_MODEL, c.LABEL_TENANT)
PREFIX = "tailwatch:fleet_"


#: The counters the console charts for the fleet, and the label each record keeps besides
#: ``KEPT_LABELS`` (``None``: none), so that a chart split by it reads the record too.
COUNTER_FAMILIES: dict[str, str | None] = {
    c.REQUESTS_TOTAL: c.LABEL_FINISHED_REASON,
    c.HTTP_RESPONSES_TOTAL: c.LABEL_CODE,
    c.PREEMPTIONS_TOTAL: None,
    c.PREFIX_CACHE_HITS_TOTAL: None,
    c.PREFIX_CACHE_QUERIES_TOTAL: None,
}
#: The gauges the console charts for the fleet, and how the replicas' readings are combined
#: (as the chart combines them: requests running are added up, KV usage is the fullest's).
GAUGE_FAMILIES: dict[str, str] = {
    c.REQUESTS_RUNNING: "sum",
    c.REQUESTS_WAITING: "sum",
    c.KV_CACHE_USAGE: "max",
}


def fleet_counter_record(family: str) -> str:
    """The record of the counter ``family``'s fleet rate."""
    if family not in COUNTER_FAMILIES:
        raise ValueError(f"{family!r} is not a recorded counter")
    return f"{PREFIX}{family}:rate5m"


def fleet_gauge_record(family: str) -> str:
    """The record of the gauge ``family`` combined over the fleet (``GAUGE_FAMILIES``)."""
    if family not in GAUGE_FAMILIES:
        raise ValueError(f"{family!r} is not a recorded gauge")
    return f"{PREFIX}{family}:{GAUGE_FAMILIES[family]}"


def fleet_record_name(family: str, part: str) -> str:
    """The record of ``family``'s ``part`` (``_bucket`` or ``_sum``)."""
    if part not in ("_bucket", "_sum"):
        raise ValueError(f"part must be _bucket or _sum, got {part!r}")
    return f"{PREFIX}{family}{part}:rate5m"
