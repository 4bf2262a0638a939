"""The two SLOs the alert benchmarks evaluate (a module of their own: the evaluation-cycle
child process imports them without the benchmarks' data generators)."""

from __future__ import annotations

from slo import (
    ErrorRatioIndicator,
    ErrorSource,
    LatencyIndicator,
    LatencyMetric,
    Selector,
    SLOSpec,
)

SLOS = (
    SLOSpec("chat-ttft", Selector(), LatencyIndicator(LatencyMetric.TTFT, 0.5), 0.99, 30),
    SLOSpec("availability", Selector(), ErrorRatioIndicator(ErrorSource.REQUESTS), 0.999, 30),
)
