"""Latency thresholds per metric, for request-record goodput (``vllm bench serve --goodput``).

One request is judged against every threshold given; an SLO's latency indicator
(:class:`slo.LatencyIndicator`) gives exactly one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Objectives:
    """Latency thresholds in seconds; a request meets an objective when its measured value is
    ``<=`` the threshold (``vllm bench serve --goodput`` semantics). ``None`` = not an objective."""

    ttft_seconds: float | None = None
    tpot_seconds: float | None = None
    itl_seconds: float | None = None
    e2e_seconds: float | None = None

    def given(self) -> Iterator[tuple[str, float]]:
        """``(field name, threshold_seconds)`` for each objective that is set."""
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                yield f.name, value
