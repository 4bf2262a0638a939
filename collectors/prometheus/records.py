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


def fleet_record_name(family: str, part: str) -> str:
    """The record of ``family``'s ``part`` (``_bucket`` or ``_sum``)."""
    if part not in ("_bucket", "_sum"):
        raise ValueError(f"part must be _bucket or _sum, got {part!r}")
    return f"{PREFIX}{family}{part}:rate5m"
