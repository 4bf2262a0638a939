"""Span delivery on ``/metrics``: how many request spans ended, were exported, or failed.

The tracer counts them (``engine/span_export.py``); this collector reads those counts at
scrape time, so a trace pipeline that loses spans shows on the engine's own dashboard
(``ended - exported`` is what has not arrived yet, or never will), not only in the log
line at shutdown. Nothing is exposed while tracing is off.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.metrics_core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from engine import metric_names as mn
from engine.safe_text import MAX_LABEL_VALUE_CHARS, safe_text
from engine.span_export import SpanDelivery

__all__ = ["SpanDeliveryCollector"]


class SpanDeliveryCollector(Collector):
    """Counters of ``delivery()`` (None: tracing off, nothing exposed)."""

    def __init__(self, delivery: Callable[[], SpanDelivery | None], model_name: str) -> None:
        self._delivery = delivery
        self._model_name = safe_text(model_name, MAX_LABEL_VALUE_CHARS)

    def collect(self) -> Iterator[Metric]:
        counts = self._delivery()
        if counts is None:
            return
        for name, documentation, value in (
            (mn.TRACE_SPANS_ENDED, "Sampled spans the engine ended.", counts.num_ended),
            (
                mn.TRACE_SPANS_EXPORTED,
                "Spans in exports the OTLP receiver accepted.",
                counts.num_exported,
            ),
            (
                mn.TRACE_SPANS_EXPORT_FAILED,
                "Spans in exports that failed after the exporter's retries.",
                counts.num_failed,
            ),
        ):
            family = CounterMetricFamily(name, documentation, labels=[mn.LABEL_MODEL_NAME])
            family.add_metric([self._model_name], value)
            yield family
