"""The window rules of :class:`~collectors.store.protocols.MetricsReader` over plain lists of
readings: what :class:`collectors.store.fake.FakeMetricsReader` answers.

Written from the rules, not from the SQL store's planner (no roll-ups, no minutes, no
intervals): step ``k`` covers ``(bounds[k], bounds[k + 1]]``;

- exact: the sum of the reset-corrected increases of each series' consecutive reading pairs
  whose later reading lies in the step, then the series added (layouts must match);
- ``prometheus-2`` / ``prometheus-3``: per series :func:`slo.window.extrapolated_increase`
  (:func:`slo.window.prometheus_histogram_increase` per bucket series) evaluated at
  ``bounds[k + 1]`` over ``bounds[k + 1] - bounds[k]``, then added.

NOTE: additions run in the order the store documents (pairs in time order within a series,
series in the order they were first stored), so that the fake and the store give the same
floats, not merely close ones; ``merge_histograms`` of two histograms adds their sums once,
which is that same order.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from collectors.store.records import SeriesInfo

# NOTE: the semantics option, its argument checks and the layout errors are pure (no SQL):
# shared with the store so that both word an error alike.
from collectors.store.window_semantics import (
    MAX_STEPS,
    LayoutChangeError,
    SeriesName,
    WindowSemantics,
    layouts_differ_error,
    parse_semantics,
    require_finite_edges,
    step_bounds,
)
from slo import ClassicHistogram, HistogramSnapshot, RangeSemantics, Sample, merge_histograms
from slo.window import (
    extrapolated_increase,
    histogram_increase,
    prometheus_histogram_increase,
    samples_in_range,
)

__all__ = [
    "MAX_STEPS",
    "SeriesData",
    "WindowSemantics",
    "exact_counter_steps",
    "exact_histogram_steps",
    "parse_semantics",
    "prometheus_counter_steps",
    "prometheus_histogram_steps",
    "require_finite_edges",
    "step_bounds",
]

#: How far outside a step its readings are looked for before the millisecond-clock range
#: rule (``slo.window.samples_in_range``) decides; only a pre-filter, so generous.
_NEAR_SECONDS = 1.0

_Timed = TypeVar("_Timed", Sample, HistogramSnapshot)


@dataclass
class SeriesData:
    """One series' readings in time order (readings of one time in arrival order)."""

    info: SeriesInfo
    owner: str  # the target of the first scrape that held the series
    values: list[Sample] = field(default_factory=list)
    snapshots: list[HistogramSnapshot] = field(default_factory=list)

    @property
    def name(self) -> SeriesName:
        return SeriesName(self.info.family, self.owner)

    def insert_value(self, sample: Sample) -> None:
        bisect.insort(self.values, sample, key=_time)

    def insert_snapshot(self, snapshot: HistogramSnapshot) -> None:
        bisect.insort(self.snapshots, snapshot, key=_time)


def exact_histogram_steps(
    chosen: Sequence[SeriesData], bounds: Sequence[float]
) -> list[ClassicHistogram | None]:
    """Per step, the merged increase of the snapshot pairs whose later snapshot lies in it."""
    steps = len(bounds) - 1
    if steps < 1:
        return []
    merged: list[_Sum | None] = [None] * steps
    owners: dict[tuple[float, ...], SeriesData] = {}  # layout -> first series seen with it
    for series in chosen:
        own: list[_Sum | None] = [None] * steps
        for k, previous, current in _pairs(series.snapshots, bounds):
            left, right = previous.histogram.upper_bounds, current.histogram.upper_bounds
            if left != right:
                raise LayoutChangeError(
                    series.name, previous.timestamp_seconds, current.timestamp_seconds, left, right
                )
            increase = histogram_increase([previous, current])
            assert increase is not None  # two snapshots
            own[k] = _Sum.of(increase) if own[k] is None else own[k].plus(increase)  # type: ignore[union-attr]
        for k, item in enumerate(own):
            if item is None:
                continue
            owners.setdefault(item.bounds, series)
            held = merged[k]
            if held is not None and held.bounds != item.bounds:
                first = owners[held.bounds]
                raise layouts_differ_error(first.name, held.bounds, series.name, item.bounds)
            merged[k] = item if held is None else held.plus(item.histogram())
    return [None if item is None else item.histogram() for item in merged]


def exact_counter_steps(
    chosen: Sequence[SeriesData], bounds: Sequence[float]
) -> list[float | None]:
    """Per step, the summed increase of the reading pairs whose later reading lies in it."""
    steps = len(bounds) - 1
    if steps < 1:
        return []
    out: list[float | None] = [None] * steps
    for series in chosen:
        for k, (_, before), (_, after) in _pairs(series.values, bounds):
            # NOTE: after a reset the counter restarted from zero: the increase is ``after``
            # itself (``slo.counter_increase`` adds ``before`` back, which can move the last bit).
            increase = after - before if after >= before else after
            out[k] = (out[k] or 0.0) + increase
    return out


def prometheus_histogram_steps(
    chosen: Sequence[SeriesData], bounds: Sequence[float], semantics: WindowSemantics
) -> list[ClassicHistogram | None]:
    """Per step, ``sum by (le) (increase(<f>_bucket[step]))`` at the step's end."""
    merged: list[tuple[SeriesData, ClassicHistogram] | None] = [None] * max(len(bounds) - 1, 0)
    for series, k, inside in _per_step(chosen, bounds, semantics, lambda s: s.snapshots):
        for previous, current in itertools.pairwise(inside):
            left, right = previous.histogram.upper_bounds, current.histogram.upper_bounds
            if left != right:
                raise LayoutChangeError(
                    series.name, previous.timestamp_seconds, current.timestamp_seconds, left, right
                )
        end, width = bounds[k + 1], bounds[k + 1] - bounds[k]
        increase = prometheus_histogram_increase(inside, end, width, _rule(semantics))
        if increase is None:
            continue
        held = merged[k]
        if held is None:
            merged[k] = (series, increase)
            continue
        owner, total = held
        if total.upper_bounds != increase.upper_bounds:
            raise layouts_differ_error(
                owner.name, total.upper_bounds, series.name, increase.upper_bounds
            )
        merged[k] = (owner, merge_histograms([total, increase]))
    return [None if item is None else item[1] for item in merged]


def prometheus_counter_steps(
    chosen: Sequence[SeriesData], bounds: Sequence[float], semantics: WindowSemantics
) -> list[float | None]:
    """Per step, ``sum(increase(<counter>[step]))`` at the step's end."""
    out: list[float | None] = [None] * max(len(bounds) - 1, 0)
    for _, k, inside in _per_step(chosen, bounds, semantics, lambda s: s.values):
        end, width = bounds[k + 1], bounds[k + 1] - bounds[k]
        increase = extrapolated_increase(inside, end, width, _rule(semantics))
        if increase is not None:
            out[k] = increase if out[k] is None else out[k] + increase
    return out


# -- helpers ------------------------------------------------------------------------------


@dataclass
class _Sum:
    """A running sum of histogram increases of one layout."""

    bounds: tuple[float, ...]
    counts: list[float]
    sum_value: float | None

    @classmethod
    def of(cls, histogram: ClassicHistogram) -> _Sum:
        return cls(histogram.upper_bounds, list(histogram.cumulative_counts), histogram.sum_value)

    def plus(self, other: ClassicHistogram) -> _Sum:
        self.counts = [x + y for x, y in zip(self.counts, other.cumulative_counts, strict=True)]
        if self.sum_value is None or other.sum_value is None:
            self.sum_value = None
        else:
            self.sum_value += other.sum_value
        return self

    def histogram(self) -> ClassicHistogram:
        return ClassicHistogram(self.bounds, tuple(self.counts), self.sum_value)


def _pairs(
    items: Sequence[_Timed], bounds: Sequence[float]
) -> Iterator[tuple[int, _Timed, _Timed]]:
    """``(k, previous, current)`` for each consecutive pair whose later reading lies in
    ``(bounds[0], bounds[-1]]``, ``k`` the step holding it."""
    times = [item.timestamp_seconds for item in items]
    low, high = bounds[0], bounds[-1]
    for j in range(max(bisect.bisect_right(times, low), 1), len(items)):
        if not times[j] <= high:
            break
        yield bisect.bisect_left(bounds, times[j]) - 1, items[j - 1], items[j]


def _per_step(
    chosen: Sequence[SeriesData],
    bounds: Sequence[float],
    semantics: WindowSemantics,
    readings: Callable[[SeriesData], Sequence[_Timed]],
) -> Iterator[tuple[SeriesData, int, list[_Timed]]]:
    """``(series, k, its readings inside step k's Prometheus range)``, series by series."""
    require_finite_edges(bounds[0], bounds[-1], semantics)
    rule = _rule(semantics)
    for series in chosen:
        items = readings(series)
        times = [item.timestamp_seconds for item in items]
        for k in range(len(bounds) - 1):
            a, b = bounds[k], bounds[k + 1]
            low = bisect.bisect_left(times, a - _NEAR_SECONDS)
            near = items[low : bisect.bisect_right(times, b + _NEAR_SECONDS)]
            yield series, k, samples_in_range(near, b, b - a, rule)


def _rule(semantics: WindowSemantics) -> RangeSemantics:
    rule = semantics.range_semantics
    assert rule is not None, "the exact window has no Prometheus range rule"
    return rule


def _time(item: Sample | HistogramSnapshot) -> float:
    return item.timestamp_seconds
