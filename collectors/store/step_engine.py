"""The step engine behind every window and step series: which minutes of a query come from
1-minute roll-ups and which intervals from raw rows, and how each step's increases add up
across the selected series.

A step ``(t - step, t]`` holds the increases of consecutive snapshot pairs whose later
snapshot lies in it (:mod:`collectors.store.raw`). Whole minutes inside a step are read from
roll-ups where maintenance has rolled them up (before :func:`rollup_coverage`), the rest
from raw rows: the figures are the same. Prometheus semantics go to
:mod:`collectors.store.prometheus_windows`.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
from dataclasses import dataclass

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from collectors.store import step_vector
from collectors.store.catalog import Catalog
from collectors.store.models import HistogramRollup, RollupState, SampleRollup, Scrape
from collectors.store.prometheus_windows import (
    prometheus_counter_steps,
    prometheus_histogram_steps,
)
from collectors.store.raw import (
    MINUTE,
    RawSnapshot,
    minute_start,
    pair_increase,
    raw_snapshots,
    raw_values,
    value_increase,
)
from collectors.store.window_semantics import (
    LayoutChangeError,
    WindowSemantics,
    layouts_differ_error,
    series_name,
)
from slo import ClassicHistogram, HistogramSnapshot, LayoutMismatchError, Sample

# NOTE: statements built once: per series, building and compiling them cost more than running
# them on SQLite.
_HISTOGRAM_ROLLUPS = (
    select(
        HistogramRollup.start_seconds,
        HistogramRollup.layout_id,
        HistogramRollup.other_layout_id,
        HistogramRollup.counts_json,
        HistogramRollup.sum_value,
    )
    .where(
        HistogramRollup.series_id == bindparam("sid"),
        HistogramRollup.start_seconds >= bindparam("lo"),
        HistogramRollup.start_seconds <= bindparam("hi"),
    )
    .order_by(HistogramRollup.start_seconds)
)
_SAMPLE_ROLLUPS = (
    select(SampleRollup.start_seconds, SampleRollup.pairs, SampleRollup.increase)
    .where(
        SampleRollup.series_id == bindparam("sid"),
        SampleRollup.start_seconds >= bindparam("lo"),
        SampleRollup.start_seconds <= bindparam("hi"),
    )
    .order_by(SampleRollup.start_seconds)
)


@dataclass(slots=True)
class _Increase:
    """A running sum of histogram increases in one layout (the sum ``None`` once any part
    lacks one)."""

    layout_id: int
    counts: list[float]
    sum_value: float | None


@dataclass(frozen=True)
class _Plan:
    """Which minutes of a query come from roll-ups and which ``(a, b]`` intervals from raw."""

    minutes: list[float]
    intervals: list[tuple[float, float]]


class StepEngine:
    """Per-step increases of series ``ids`` over the step edges ``bounds`` (step ``k`` is
    ``(bounds[k], bounds[k + 1]]``), with layouts resolved through ``catalog``.

    ``vectorised`` (the default) computes exact windows with numpy
    (:mod:`collectors.store.step_vector`), falling back to the reference loop below for
    what it does not handle; ``False`` runs the reference loop only (same figures, bit for
    bit: the benchmark and the equivalence tests compare the two)."""

    def __init__(self, catalog: Catalog, *, vectorised: bool = True) -> None:
        self._catalog = catalog
        self._vectorised = vectorised

    def plan(self, session: Session, bounds: list[float], use_rollups: bool) -> _Plan:
        """What an exact read over ``bounds`` reads from roll-ups and what raw: made once for
        several selections over the same steps (a per-target read)."""
        return _plan(session, bounds, use_rollups)

    def histogram_steps(
        self,
        session: Session,
        ids: list[int],
        bounds: list[float],
        use_rollups: bool,
        semantics: WindowSemantics,
        plan: _Plan | None = None,
    ) -> list[ClassicHistogram | None]:
        if semantics is not WindowSemantics.EXACT:

            def snapshots_of(sid: int, a: float, b: float) -> list[HistogramSnapshot]:
                # NOTE: the raw reader's rows start at the snapshot at or before ``a``; the
                # Prometheus reader takes only those inside each range from them.
                layout = self._catalog.bounds
                return [
                    HistogramSnapshot(
                        s.timestamp_seconds,
                        ClassicHistogram(
                            layout(session, s.layout_id), tuple(s.counts), s.sum_value
                        ),
                    )
                    for s in raw_snapshots(session, sid, a, b)
                ]

            return prometheus_histogram_steps(session, ids, bounds, semantics, snapshots_of)
        steps = len(bounds) - 1
        if steps < 1:
            return []
        plan = _plan(session, bounds, use_rollups) if plan is None else plan
        if self._vectorised:
            fast = step_vector.histogram_steps(
                session, self._catalog, ids, bounds, plan.minutes, plan.intervals
            )
            if fast is not None:
                return fast
        wanted = set(plan.minutes)
        merged: list[_Increase | None] = [None] * steps
        owners: dict[int, int] = {}  # layout id -> the first series merged with it
        for sid in ids:
            acc: list[_Increase | None] = [None] * steps
            if plan.minutes:
                rows = session.connection().execute(
                    _HISTOGRAM_ROLLUPS, {"sid": sid, "lo": plan.minutes[0], "hi": plan.minutes[-1]}
                )
                for m, layout, other, counts, sum_value in rows:
                    if m not in wanted:
                        continue
                    if other is not None:
                        raise self._change_in_minute(session, sid, m, layout, other)
                    k = bisect.bisect_left(bounds, m + MINUTE) - 1
                    self._add(session, acc, k, layout, json.loads(counts), sum_value)
            for a, b in plan.intervals:
                snaps = raw_snapshots(session, sid, a, b)
                change = self._first_change(session, sid, snaps, a)
                if change is not None:
                    raise change
                for prev, cur in itertools.pairwise(snaps):
                    t, layout_id, _, _ = cur
                    if t <= a:
                        continue
                    counts, sum_value = pair_increase(prev, cur)
                    k = bisect.bisect_left(bounds, t) - 1
                    self._add(session, acc, k, layout_id, counts, sum_value)
            for k, item in enumerate(acc):
                if item is None:
                    continue
                owners.setdefault(item.layout_id, sid)
                held = merged[k]
                if held is not None and held.layout_id != item.layout_id:
                    raise layouts_differ_error(
                        series_name(session, owners[held.layout_id]),
                        self._catalog.bounds(session, held.layout_id),
                        series_name(session, sid),
                        self._catalog.bounds(session, item.layout_id),
                    )
                self._add(session, merged, k, item.layout_id, item.counts, item.sum_value)
        return [
            None
            if item is None
            else ClassicHistogram(
                self._catalog.bounds(session, item.layout_id), tuple(item.counts), item.sum_value
            )
            for item in merged
        ]

    def _add(
        self,
        session: Session,
        acc: list[_Increase | None],
        k: int,
        layout_id: int,
        counts: list[float],
        sum_value: float | None,
    ) -> None:
        """Add an increase to step ``k`` of ``acc``."""
        item = acc[k]
        if item is None:
            acc[k] = _Increase(layout_id, list(counts), sum_value)
            return
        if item.layout_id != layout_id:
            first = self._catalog.bounds(session, item.layout_id)
            second = self._catalog.bounds(session, layout_id)
            raise LayoutMismatchError(
                f"bucket layouts differ (merge): {len(first)} vs {len(second)} bounds; "
                "merge only series with the same buckets, or query them separately",
                first,
                second,
            )
        item.counts = [x + y for x, y in zip(item.counts, counts, strict=True)]
        if item.sum_value is not None:
            item.sum_value = None if sum_value is None else item.sum_value + sum_value

    def counter_steps(
        self,
        session: Session,
        ids: list[int],
        bounds: list[float],
        use_rollups: bool,
        semantics: WindowSemantics,
        plan: _Plan | None = None,
    ) -> list[float | None]:
        if semantics is not WindowSemantics.EXACT:

            def values_of(sid: int, a: float, b: float) -> list[Sample]:
                return [Sample(t, v) for t, v in raw_values(session, sid, a, b)]

            return prometheus_counter_steps(session, ids, bounds, semantics, values_of)
        steps = len(bounds) - 1
        if steps < 1:
            return []
        plan = _plan(session, bounds, use_rollups) if plan is None else plan
        if self._vectorised:
            return step_vector.counter_steps(session, ids, bounds, plan.minutes, plan.intervals)
        wanted = set(plan.minutes)
        out: list[float | None] = [None] * steps
        for sid in ids:
            if plan.minutes:
                rows = session.connection().execute(
                    _SAMPLE_ROLLUPS, {"sid": sid, "lo": plan.minutes[0], "hi": plan.minutes[-1]}
                )
                for m, pairs, increase in rows:
                    if m in wanted and pairs > 0:
                        k = bisect.bisect_left(bounds, m + MINUTE) - 1
                        out[k] = (out[k] or 0.0) + increase
            for a, b in plan.intervals:
                values = raw_values(session, sid, a, b)
                for (_, before), (t, after) in itertools.pairwise(values):
                    if t <= a:
                        continue
                    k = bisect.bisect_left(bounds, t) - 1
                    out[k] = (out[k] or 0.0) + value_increase(before, after)
        return out

    def _first_change(
        self, session: Session, sid: int, snaps: list[RawSnapshot], after: float
    ) -> LayoutChangeError | None:
        """The error for the first pair of ``snaps`` (raw snapshots of series ``sid``) whose
        later snapshot lies after ``after`` (the raw window rule) and whose layouts differ."""
        for prev, cur in itertools.pairwise(snaps):
            # NOTE: the layout first: it almost never differs, so most pairs test only it.
            if prev.layout_id != cur.layout_id and cur.timestamp_seconds > after:
                return LayoutChangeError(
                    series_name(session, sid),
                    prev.timestamp_seconds,
                    cur.timestamp_seconds,
                    self._catalog.bounds(session, prev.layout_id),
                    self._catalog.bounds(session, cur.layout_id),
                )
        return None

    def _change_in_minute(
        self, session: Session, sid: int, m: float, layout: int, other: int
    ) -> LayoutChangeError:
        """The error for a rolled-up minute ``(m, m + 60]`` that holds a layout change: the
        exact snapshots from raw where they are still kept, else the minute's bounds."""
        snaps = raw_snapshots(session, sid, m, m + MINUTE)
        change = self._first_change(session, sid, snaps, m)
        if change is not None:
            return change
        left, right = self._catalog.bounds(session, layout), self._catalog.bounds(session, other)
        name = series_name(session, sid)
        return LayoutChangeError(name, m, m + MINUTE, left, right, is_exact=False)


def rollup_coverage(session: Session) -> float:
    """Roll-ups are complete for every minute ending at or before the returned time: before
    the oldest scrape not yet rolled up (and settled), or before the raw horizon (where raw
    rows are gone)."""
    state = session.get(RollupState, 1)
    if state is None:
        return -math.inf
    # NOTE: ``+ 0`` keeps SQLite from answering min() by walking the whole time index
    # (checking ids as it goes) instead of the few ids above the settled one.
    pending = session.scalar(
        select(func.min(Scrape.timestamp_seconds + 0)).where(Scrape.id > state.settled_scrape_id)
    )
    clean = math.inf if pending is None else minute_start(pending)
    horizon = -math.inf if state.raw_horizon_seconds is None else state.raw_horizon_seconds
    return max(clean, horizon)


def _rollup_extent(session: Session) -> tuple[float, float] | None:
    """The first and the last rolled-up minute's start over both roll-up tables (``None``: no
    roll-ups); each an index lookup."""
    starts = [
        session.scalar(select(func.min(table.start_seconds)))
        for table in (HistogramRollup, SampleRollup)
    ]
    ends = [
        session.scalar(select(func.max(table.start_seconds)))
        for table in (HistogramRollup, SampleRollup)
    ]
    known = [t for t in starts if t is not None]
    if not known:
        return None
    return min(known), max(t for t in ends if t is not None)


def _plan(session: Session, bounds: list[float], use_rollups: bool) -> _Plan:
    """The minutes read from roll-ups (each inside one step, before the coverage) and the
    ``(a, b]`` intervals read raw (everything else)."""
    low, high = bounds[0], bounds[-1]
    minutes: list[float] = []
    extent = _rollup_extent(session) if use_rollups and len(bounds) > 1 else None
    if extent is not None:
        # NOTE: only minutes that may hold roll-up rows are planned, so a window reaching
        # from -inf or to +inf (or over years) costs what its data costs, not one step per
        # minute of its span; the minutes outside are read raw, where they are empty too.
        first, last = extent
        limit = min(high, rollup_coverage(session), last + MINUTE)
        m = math.ceil(max(low, first) / MINUTE) * MINUTE
        while m + MINUTE <= limit:
            k = bisect.bisect_right(bounds, m) - 1
            if bounds[k + 1] >= m + MINUTE:
                minutes.append(m)
            m += MINUTE
    intervals: list[tuple[float, float]] = []
    cursor = low
    for m in minutes:
        if m > cursor:
            intervals.append((cursor, m))
        cursor = m + MINUTE
    if cursor < high:
        intervals.append((cursor, high))
    return _Plan(minutes, intervals)
