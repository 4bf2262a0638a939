"""The rows a query answers (``(labels, value)`` per series), decoded into what the reader
returns: histograms per target or for the fleet, from the rows of ``collectors.prometheus
.queries``' histogram windows and of the console's fleet records."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

from collectors import canonical as c
from collectors.prometheus import queries as q
from collectors.prometheus.kept import Rows
from collectors.prometheus.names import TARGET_LABEL
from slo import ClassicHistogram, parse_le

#: ``parse_le`` of the few ``le`` values a fleet's layouts hold, parsed once: a day's answer
#: for 20 replicas repeats each of them ~2,000 times.
_bound = functools.lru_cache(maxsize=4096)(parse_le)


def target_of(labels: Mapping[str, str]) -> str:
    """A row's target (its ``instance``; ``""`` for a row summed over targets)."""
    return labels.get(TARGET_LABEL, "")


def histograms_by_target(rows: Rows, scale: float) -> dict[str, ClassicHistogram | None]:
    """One step's rows as a histogram per target (``None``: its layout changed); ``le`` and
    ``_sum`` scaled by ``scale`` (a source in milliseconds)."""
    buckets: dict[str, list[tuple[float, float]]] = {}
    sums: dict[str, float] = {}
    changed: set[str] = set()
    for labels, value in rows:
        target, le = target_of(labels), labels.get(c.LABEL_LE, "")
        if le == q.LAYOUT_CHANGED_ROW:
            changed.add(target)
        elif le == q.SUM_ROW:
            sums[target] = value * scale
        else:
            bound = _bound(le)
            if bound is not None:
                scaled = bound * scale if math.isfinite(bound) else bound
                buckets.setdefault(target, []).append((scaled, value))
    out: dict[str, ClassicHistogram | None] = {t: None for t in changed}
    for target, items in buckets.items():
        if target not in changed:
            out[target] = ClassicHistogram.from_buckets(items, sums.get(target))
    return out


def fleet_histogram(rows: Rows, scale: float) -> ClassicHistogram | None:
    """A ``sum by (le)`` answer as one histogram."""
    return histograms_by_target(rows, scale).get("")


def recorded_histogram(rows: Rows, step: float) -> ClassicHistogram | None:
    """A recorded fleet rate over a step as the histogram of its increase over the step."""
    return fleet_histogram([(labels, v * step) for labels, v in rows], 1.0)
