"""Canonical scrapes (what the collector stores) written back as a vLLM server's series, so one
history loads a test's fake and a backfilled Prometheus alike: each canonical family under the
vLLM name the dialect table maps onto it (read from the table, not typed here), ``target`` as
Prometheus's ``instance`` and ``model`` as vLLM's ``model_name``."""

from __future__ import annotations

import math
from collections.abc import Sequence

from collectors.canonical import Kind
from collectors.dialect_rules import VLLM_RULES
from collectors.store import ScrapeRecord
from collectors.store.fake import FakeMetricsReader
from tests.collectors.metrics_servers import Point

_RENAME = {"target": "instance", "model": "model_name"}


class CapturingFake(FakeMetricsReader):
    """A fake that also keeps every record written to it (to load a server with them)."""

    def __init__(self) -> None:
        self.records: list[ScrapeRecord] = []
        super().__init__()

    def write_scrapes(self, records):  # type: ignore[no-untyped-def]
        self.records += list(records)
        return super().write_scrapes(records)


def vllm_name(family: str) -> str | None:
    """The current vLLM name of a canonical family (the first plain rule of the table); None
    for a family vLLM does not export (the bundled engine's own)."""
    return next(
        (r.source for r in VLLM_RULES if r.family == family and not r.flags and not r.match), None
    )


def _labels(labels, **extra: str) -> tuple[tuple[str, str], ...]:
    out = {_RENAME.get(k, k): v for k, v in labels}
    return tuple(sorted({**out, **extra}.items()))


def vllm_points(records: Sequence[ScrapeRecord]) -> tuple[list[Point], dict[str, str]]:
    """The records' samples as vLLM series, and each family's type (for the backfill)."""
    points: list[Point] = []
    types: dict[str, str] = {}
    for record in records:
        t = record.timestamp_seconds
        up = (("instance", record.target),)
        points.append(Point("up", up, 1.0 if record.is_up else 0.0, t))
        for s in record.samples:
            stem = vllm_name(s.family)
            if stem is None:  # NOTE: a vLLM server has no such series
                continue
            name = stem + "_total" if s.kind is Kind.COUNTER else stem
            types[stem] = s.kind.value
            points.append(Point(name, _labels(s.labels), s.value, t))
        for h in record.histograms:
            stem = vllm_name(h.family)
            if stem is None:
                continue
            types[stem] = "histogram"
            for bound, count in zip(h.upper_bounds, h.cumulative_counts, strict=True):
                le = "+Inf" if bound == math.inf else repr(bound)
                points.append(Point(f"{stem}_bucket", _labels(h.labels, le=le), count, t))
            points.append(Point(f"{stem}_sum", _labels(h.labels), h.sum_value or 0.0, t))
            points.append(Point(f"{stem}_count", _labels(h.labels), h.count, t))
    return points, types
