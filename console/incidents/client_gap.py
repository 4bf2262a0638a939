"""The clients' first tokens against the engines' over an incident: where a gateway or a
load generator exports them (``client_ttft_seconds``), the p95 the clients saw, the p95 the
engines report and the gap between them, before (the baseline) and during the incident.

Pure: the frame reads both windows through the
:class:`~collectors.store.protocols.MetricsReader` protocol (the store or a Prometheus). A
gap that grew while the engines' p95 held is time added in front of the engines (the
client-server-gap cause); a constant gap is overhead the baseline already had.
"""

from __future__ import annotations

import math

import pandas as pd

from alerts.triage import TimeWindow
from collectors import canonical as c
from collectors.store.protocols import MetricsReader

QUANTILE = 0.95
CLIENTS, ENGINES, GAP = "clients (gateway)", "engines", "gap"
COLUMNS = ["first token seen by", "p95 before (ms)", "p95 (ms)", "change (ms)"]


def _p95_ms(reader: MetricsReader, family: str, window: TimeWindow) -> float:
    histogram = reader.histogram_window(family, None, window.start_seconds, window.end_seconds)
    if histogram is None or histogram.total_count <= 0:
        return math.nan
    value = histogram.quantile(QUANTILE).value
    return value * 1000.0 if math.isfinite(value) else math.nan


def gap_frame(reader: MetricsReader, window: TimeWindow, baseline: TimeWindow) -> pd.DataFrame:
    """Three rows (the clients', the engines', their gap), the baseline's p95, the
    incident's and the change in milliseconds; empty when no client timings are stored for
    either window (the section is then not shown)."""
    clients = [_p95_ms(reader, c.CLIENT_TTFT_SECONDS, w) for w in (baseline, window)]
    if not any(math.isfinite(v) for v in clients):
        return pd.DataFrame([], columns=COLUMNS)
    engines = [_p95_ms(reader, c.TTFT_SECONDS, w) for w in (baseline, window)]
    gap = [a - b for a, b in zip(clients, engines, strict=True)]
    sides = ((CLIENTS, clients), (ENGINES, engines), (GAP, gap))
    rows = [[name, *pair, pair[1] - pair[0]] for name, pair in sides]
    return pd.DataFrame(rows, columns=COLUMNS)
