"""Who an incident fell on: per-tenant and per-adapter tables beside the triage, shown when a
cause points there (a tenant that starves the others, rare adapters swapped in and out).

Pure: each frame reads the incident window and its baseline through the
:class:`~collectors.store.protocols.MetricsReader` protocol (the store or a Prometheus),
one row per label value: its requests and their share in both windows, its latency p95 in
both and the change, and what the dimension adds (an adapter's cold loads and load time).
Rows whose latency rose most come first; at most :data:`MAX_ROWS`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

from alerts import Cause
from alerts.triage import TimeWindow
from collectors import canonical as c
from collectors.store.protocols import MetricsReader

#: The most rows a breakdown shows (a longer table is a list nobody reads during an incident).
MAX_ROWS = 16
QUANTILE = 0.95


@dataclass(frozen=True)
class Dimension:
    """One breakdown: the label that splits the fleet, the counter of its requests, the
    latency histogram whose p95 it shows, the counters it adds (``(column, family)``) and
    the triage causes that point at it (their values)."""

    name: str
    label: str
    requests: str
    latency: str
    latency_name: str
    extras: tuple[tuple[str, str], ...]
    causes: frozenset[Cause]


TENANT = Dimension(
    "tenant",
    c.LABEL_TENANT,
    c.REQUESTS_TOTAL,
    c.TTFT_SECONDS,
    "TTFT",
    (("prompt tokens", c.PROMPT_TOKENS_TOTAL),),
    frozenset({Cause.NOISY_TENANT, Cause.OVERLOAD}),
)
ADAPTER = Dimension(
    "adapter",
    c.LABEL_LORA_NAME,
    c.LORA_REQUESTS_TOTAL,
    c.LORA_E2E_SECONDS,
    "e2e",
    (("cold loads", c.LORA_LOADS_TOTAL), ("load seconds", c.LORA_LOAD_SECONDS_TOTAL)),
    frozenset({Cause.ADAPTER_THRASH}),
)
DIMENSIONS = (TENANT, ADAPTER)


def columns(dimension: Dimension) -> list[str]:
    """The frame's columns, in order."""
    p95 = f"{dimension.latency_name} p95"
    return [
        dimension.name,
        "requests",
        "share",
        "share before",
        f"{p95} (ms)",
        f"{p95} before (ms)",
        "change",
        *(name for name, _ in dimension.extras),
    ]


def points_here(dimension: Dimension, causes: Iterable[str]) -> bool:
    """Whether any of ``causes`` (the hypotheses worth reading) points at ``dimension``."""
    return any(cause in dimension.causes for cause in causes)


def adapter_names(reader: MetricsReader) -> list[str]:
    """The adapters with stored request series (the base model's ``""`` left out)."""
    found = {
        dict(info.labels).get(c.LABEL_LORA_NAME, "")
        for info in reader.series(c.LORA_REQUESTS_TOTAL)
    }
    return sorted(name for name in found if name)


def _count(reader: MetricsReader, family: str, selector: dict, window: TimeWindow) -> float:
    value = reader.counter_window(family, selector, window.start_seconds, window.end_seconds)
    return math.nan if value is None else float(value)


def _p95_ms(reader: MetricsReader, family: str, selector: dict, window: TimeWindow) -> float:
    histogram = reader.histogram_window(family, selector, window.start_seconds, window.end_seconds)
    if histogram is None or histogram.total_count <= 0:
        return math.nan
    value = histogram.quantile(QUANTILE).value
    return value * 1000.0 if math.isfinite(value) else math.nan


def _share(part: float, total: float) -> float:
    return part / total if math.isfinite(part) and math.isfinite(total) and total > 0 else math.nan


def breakdown_frame(
    reader: MetricsReader,
    dimension: Dimension,
    values: Sequence[str],
    window: TimeWindow,
    baseline: TimeWindow,
) -> pd.DataFrame:
    """One row per value of ``dimension.label`` in ``values`` (see the module docstring);
    values with no request in either window are left out."""
    counts = {}
    for value in values:
        selector = {dimension.label: value}
        counts[value] = (
            _count(reader, dimension.requests, selector, window),
            _count(reader, dimension.requests, selector, baseline),
        )
    totals = [math.fsum(n[i] for n in counts.values() if math.isfinite(n[i])) for i in range(2)]
    rows = []
    for value, (now, before) in counts.items():
        if not (now > 0 or before > 0):
            continue
        selector = {dimension.label: value}
        p95 = _p95_ms(reader, dimension.latency, selector, window)
        p95_before = _p95_ms(reader, dimension.latency, selector, baseline)
        change = p95 / p95_before if p95_before > 0 else math.nan
        extras = [_count(reader, family, selector, window) for _, family in dimension.extras]
        rows.append(
            [
                value,
                now,
                _share(now, totals[0]),
                _share(before, totals[1]),
                p95,
                p95_before,
                change,
                *extras,
            ]
        )
    # NOTE: who the incident fell on first: the largest rise, then the largest p95
    rows.sort(
        key=lambda r: (
            -(r[6] if math.isfinite(r[6]) else -math.inf),
            -(r[4] if math.isfinite(r[4]) else -math.inf),
            r[0],
        )
    )
    return pd.DataFrame(rows[:MAX_ROWS], columns=columns(dimension))
