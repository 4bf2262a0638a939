"""The fleet's own past, as a relative rule reads it: its window statistic at every step of
the baseline window, and the median of those.

A relative rule compares its window's statistic (a p99, a mean queue time, a preemption
rate) with what the same statistic was over the baseline window before it: the **median**
of its values at each step (a fifth of a window, on the step grid as a PromQL subquery's)
whose window ends in the baseline window (``(split - baseline, split]``, where ``split`` is
where the rule's window starts). The
exported PromQL reads the rule's own recording rule the same way:
``quantile_over_time(0.5, <record>[1h:1m] offset 5m)``.

NOTE: a median of windows, not one window pooled over the baseline hour, so that an
incident does not become its own baseline: it must outlast half the baseline window before
the comparison absorbs it. Pooled, an hour-long baseline absorbed a drill's overload within
25 s at a twentieth of production's scale (the queue's pooled mean doubled with it), and
the page resolved while requests still queued.

A window with too little evidence (the rule's ``min_observations``) has no value, and the
median needs :data:`STEPS_PER_WINDOW` values at least: one window's length of history.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from collectors.store.protocols import MetricsReader
from slo import ClassicHistogram, merge_histograms

#: Steps per rule window: the resolution of the baseline (a 5 m window: one a minute).
STEPS_PER_WINDOW = 5
#: The fewest baseline values a median is taken over: one window's length of history.
MIN_BASELINE_VALUES = STEPS_PER_WINDOW

T = TypeVar("T")


def baseline_step_seconds(window_seconds: float) -> float:
    """The baseline's step for a rule window (PromQL's subquery resolution)."""
    return window_seconds / STEPS_PER_WINDOW


def _sliding(items: list[T | None], add: Callable[[list[T]], T]) -> list[T | None]:
    """Each run of :data:`STEPS_PER_WINDOW` consecutive steps added up (None: no data)."""
    out: list[T | None] = []
    for end in range(STEPS_PER_WINDOW, len(items) + 1):
        chunk = [x for x in items[end - STEPS_PER_WINDOW : end] if x is not None]
        out.append(add(chunk) if chunk else None)
    return out


def _steps(
    split: float, window_seconds: float, baseline_seconds: float
) -> tuple[float, float, float]:
    """(start, end, step) of the one step-series read a baseline takes. Its steps fall on the
    step grid (whole multiples of the step since the epoch), as a PromQL subquery's do, the
    last at or before ``split``; it starts where its earliest window does, so that the first
    ``STEPS_PER_WINDOW`` steps make the first whole window. On the grid, the next evaluation's
    read shares every step but the newest with this one's, and a reader that keeps answers
    (``collectors.prometheus.kept``) asks only for that one."""
    step = baseline_step_seconds(window_seconds)
    count = max(1, round(baseline_seconds / step))
    end = math.floor(split / step + 1e-9) * step
    return end - (count + STEPS_PER_WINDOW - 1) * step, end, step


def baseline_histograms(
    reader: MetricsReader,
    family: str,
    selector: Mapping[str, str],
    split: float,
    window_seconds: float,
    baseline_seconds: float,
) -> list[ClassicHistogram | None]:
    """The histogram over ``(t - window, t]`` for every baseline step ``t`` in
    ``(split - baseline, split]``, oldest first, from one step-series read."""
    start, end, step = _steps(split, window_seconds, baseline_seconds)
    steps = reader.histogram_series(family, selector, start, end, step)
    return _sliding([h for _, h in steps], merge_histograms)


def baseline_increases(
    reader: MetricsReader,
    family: str,
    selector: Mapping[str, str],
    split: float,
    window_seconds: float,
    baseline_seconds: float,
) -> list[float | None]:
    """A counter's increase over ``(t - window, t]`` for every baseline step ``t``."""
    start, end, step = _steps(split, window_seconds, baseline_seconds)
    steps = reader.counter_series(family, selector, start, end, step)
    return _sliding([v for _, v in steps], sum)


def baseline_increases_by_target(
    reader: MetricsReader,
    family: str,
    labels: Mapping[str, str] | None,
    split: float,
    window_seconds: float,
    baseline_seconds: float,
) -> dict[str, list[float | None]]:
    """:func:`baseline_increases` of each target of the selection, from one read."""
    start, end, step = _steps(split, window_seconds, baseline_seconds)
    steps = reader.counter_series_by_target(family, labels, start, end, step)
    return {t: _sliding([v for _, v in items], sum) for t, items in steps.items()}


def median(values: Iterable[float | None]) -> float:
    """The median of the finite values; NaN with fewer than :data:`MIN_BASELINE_VALUES`."""
    known = [v for v in values if v is not None and math.isfinite(v)]
    if len(known) < MIN_BASELINE_VALUES:
        return math.nan
    return statistics.median(known)


def observations(window: ClassicHistogram | None) -> float:
    """How many observations a window holds (0 without one)."""
    return 0.0 if window is None else float(window.cumulative_counts[-1])
