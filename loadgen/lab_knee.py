"""The knee of each knob value of a sweep, from its stored points: a pure function the CLI's
summary table and the console's knee chart share.

Per (knob value, rate) the repeats are averaged (the mean of each figure over the repeats that
measured it); the knee is the highest rate whose mean SLO attainment is at or above
``target`` (``loadgen.sweep``'s definition, DistServe's), and ``first_failing_rate`` the lowest
failing rate above it. A NaN attainment (no request scheduled) fails, as in ``loadgen.sweep``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collectors.store.lab_records import JsonScalar, LabPoint

DEFAULT_TARGET = 0.9


@dataclass(frozen=True)
class RatePoint:
    """The mean over ``num_repeats`` repeats at one rate; ``None`` where no repeat measured
    it (e.g. no request finished, so no TTFT)."""

    rate: float
    num_repeats: int
    slo_attainment: float
    request_goodput: float | None
    request_throughput: float | None
    ttft_p95_ms: float | None
    ttft_p99_ms: float | None
    itl_p95_ms: float | None
    itl_p99_ms: float | None

    def passes(self, target: float) -> bool:
        return not math.isnan(self.slo_attainment) and self.slo_attainment >= target


@dataclass(frozen=True)
class KneeCurve:
    """One knob value's rates, lowest first, and its knee (``None``: even the lowest failed)."""

    knob_value: JsonScalar
    knee_rate: float | None
    first_failing_rate: float | None
    points: tuple[RatePoint, ...]


def _figure(summary: Mapping[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = summary
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None
    return float(value)


_FIGURES = {
    "request_goodput": ("request_goodput",),
    "request_throughput": ("request_throughput",),
    "ttft_p95_ms": ("ttft_ms", "p95"),
    "ttft_p99_ms": ("ttft_ms", "p99"),
    "itl_p95_ms": ("itl_ms", "p95"),
    "itl_p99_ms": ("itl_ms", "p99"),
}


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def rate_point(rate: float, summaries: Sequence[Mapping[str, Any]]) -> RatePoint:
    attainment = _mean(_figure(s, ("slo_attainment",)) for s in summaries)
    return RatePoint(
        rate=rate,
        num_repeats=len(summaries),
        slo_attainment=math.nan if attainment is None else attainment,
        **{name: _mean(_figure(s, path) for s in summaries) for name, path in _FIGURES.items()},
    )


def knee_curves(points: Sequence[LabPoint], target: float = DEFAULT_TARGET) -> list[KneeCurve]:
    """One curve per knob value, in the order the values first appear in ``points``."""
    if not 0 < target <= 1:
        raise ValueError(f"target={target!r}: an SLO attainment in (0, 1]")
    # NOTE: values are grouped by their JSON text, so 1 and 1.0 (and True) stay apart, as
    # they are different knob values to the engine, and a NaN groups with itself.
    groups: dict[str, tuple[JsonScalar, dict[float, list[Mapping[str, Any]]]]] = {}
    for point in points:
        key = json.dumps(point.knob_value)
        _, rates = groups.setdefault(key, (point.knob_value, {}))
        rates.setdefault(point.rate, []).append(point.summary)
    curves = []
    for value, rates in groups.values():
        row = tuple(rate_point(rate, rates[rate]) for rate in sorted(rates))
        passing = [p.rate for p in row if p.passes(target)]
        knee = max(passing) if passing else None
        failing = [p.rate for p in row if not p.passes(target) and (knee is None or p.rate > knee)]
        curves.append(KneeCurve(value, knee, min(failing) if failing else None, row))
    return curves
