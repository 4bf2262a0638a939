"""Windows with Prometheus semantics (``semantics="prometheus-2"`` / ``"prometheus-3"``):
what ``sum by (le) (increase(<f>_bucket[w]))`` (or ``sum(increase(<counter>[w]))``) gives on
that Prometheus holding the same samples, step by step over raw readings. The semantics
themselves are described in :mod:`collectors.store.window_semantics`.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from sqlalchemy.orm import Session

from collectors.store.models import RollupState
from collectors.store.window_semantics import (
    LayoutChangeError,
    WindowSemantics,
    layouts_differ_error,
    require_finite_edges,
    series_name,
)
from slo import ClassicHistogram, HistogramSnapshot, RangeSemantics, Sample, merge_histograms
from slo.window import (
    extrapolated_increase,
    format_utc,
    prometheus_histogram_increase,
    samples_in_range,
)

#: What a Prometheus range selects from: a counter's samples or a histogram's snapshots.
_Timed = TypeVar("_Timed", Sample, HistogramSnapshot)
#: How far outside ``(a, b]`` a sample may lie and still be in the range on Prometheus's
#: integer-millisecond clock. NOTE: 2 ms, not 1: the range starts at round(b ms) - round((b - a)
#: ms), up to 1 ms before a, and takes a sample that rounds to it (up to 1.5 ms before a).
_MARGIN_SECONDS = 0.002


def require_raw_retained(session: Session, start: float, semantics: WindowSemantics) -> None:
    """Prometheus semantics need the raw samples of the whole range; refuse a range that
    reaches before the raw horizon (where retention deleted them) rather than answer from
    the samples that happen to be left."""
    state = session.get(RollupState, 1)
    horizon = None if state is None else state.raw_horizon_seconds
    if horizon is not None and start < horizon:
        raise ValueError(
            f"semantics={semantics.value!r} reads raw snapshots, and those before "
            f"{format_utc(horizon)} were deleted by retention; the window starts at "
            f"{format_utc(start)}: use semantics='exact' (roll-ups) for older windows"
        )


def prometheus_histogram_steps(
    session: Session,
    ids: Sequence[int],
    bounds: Sequence[float],
    semantics: WindowSemantics,
    snapshots_of: Callable[[int, float, float], list[HistogramSnapshot]],
) -> list[ClassicHistogram | None]:
    """Step ``k``: ``sum by (le) (increase(...[bounds[k+1] - bounds[k]]))`` at ``bounds[k+1]``
    over series ``ids``. ``snapshots_of(sid, a, b)`` gives (at least) a series' snapshots
    with ``a <= t <= b``, in time order. Raises :class:`LayoutChangeError` /
    ``slo.LayoutMismatchError``."""
    rule = _range_rule(semantics)
    merged: list[tuple[int, ClassicHistogram] | None] = [None] * (len(bounds) - 1)
    for sid, k, inside in _per_step(session, ids, bounds, semantics, snapshots_of):
        _require_one_layout(session, sid, inside)
        end, width = bounds[k + 1], bounds[k + 1] - bounds[k]
        increase = prometheus_histogram_increase(inside, end, width, rule)
        if increase is None:
            continue
        held = merged[k]
        if held is None:
            merged[k] = (sid, increase)
            continue
        owner, total = held
        if total.upper_bounds != increase.upper_bounds:
            raise layouts_differ_error(
                series_name(session, owner),
                total.upper_bounds,
                series_name(session, sid),
                increase.upper_bounds,
            )
        # NOTE: merge_histograms adds the later series to the running sum, as Prometheus's
        # sum does; for two series the order cannot matter (float addition commutes).
        merged[k] = (owner, merge_histograms([total, increase]))
    return [None if item is None else item[1] for item in merged]


def prometheus_counter_steps(
    session: Session,
    ids: Sequence[int],
    bounds: Sequence[float],
    semantics: WindowSemantics,
    values_of: Callable[[int, float, float], list[Sample]],
) -> list[float | None]:
    """Step ``k``: ``sum(increase(counter[bounds[k+1] - bounds[k]]))`` at ``bounds[k+1]``
    over series ``ids`` (``None`` where no series has two samples in the range)."""
    rule = _range_rule(semantics)
    out: list[float | None] = [None] * (len(bounds) - 1)
    for _, k, inside in _per_step(session, ids, bounds, semantics, values_of):
        end, width = bounds[k + 1], bounds[k + 1] - bounds[k]
        increase = extrapolated_increase(inside, end, width, rule)
        if increase is not None:
            out[k] = increase if out[k] is None else out[k] + increase
    return out


def _per_step(
    session: Session,
    ids: Sequence[int],
    bounds: Sequence[float],
    semantics: WindowSemantics,
    read: Callable[[int, float, float], list[_Timed]],
) -> Iterator[tuple[int, int, list[_Timed]]]:
    """``(sid, k, what series sid has inside step k's range)``, series by series: one read
    per series for all steps, and each step's range looked up by bisection in it, so a
    series query costs O(samples + steps), not O(samples x steps)."""
    rule = _range_rule(semantics)
    require_finite_edges(bounds[0], bounds[-1], semantics)
    require_raw_retained(session, bounds[0], semantics)
    if len(bounds) < 2:
        return  # no steps: nothing to read
    for sid in ids:
        items = read(sid, bounds[0] - _MARGIN_SECONDS, bounds[-1] + _MARGIN_SECONDS)
        times = [s.timestamp_seconds for s in items]
        for k in range(len(bounds) - 1):
            a, b = bounds[k], bounds[k + 1]
            low = bisect.bisect_left(times, a - _MARGIN_SECONDS)
            near = items[low : bisect.bisect_right(times, b + _MARGIN_SECONDS)]
            yield sid, k, samples_in_range(near, b, b - a, rule)


def _require_one_layout(session: Session, sid: int, snaps: Sequence[HistogramSnapshot]) -> None:
    for previous, current in itertools.pairwise(snaps):
        left, right = previous.histogram.upper_bounds, current.histogram.upper_bounds
        if left != right:
            raise LayoutChangeError(
                series_name(session, sid),
                previous.timestamp_seconds,
                current.timestamp_seconds,
                left,
                right,
            )


def _range_rule(semantics: WindowSemantics) -> RangeSemantics:
    rule = semantics.range_semantics
    if rule is None:
        raise ValueError("the exact window is computed by the store's own reader, not here")
    return rule
