"""How the store's windows read: the semantics option, and what a bucket-layout change does.

Two semantics (``semantics=`` on every window and series read of :class:`Store`):

- ``"exact"`` (the default): per series, the increase from its last snapshot at or before
  the window's start to its last at or before its end, resets corrected, no extrapolation.
  With edges aligned to scrapes this is the exact number of observations in the window.
- ``"prometheus-2"`` / ``"prometheus-3"``: what ``sum by (le) (increase(<f>_bucket[w]))``
  (or ``sum(increase(<counter>[w]))``) evaluated at the window's end gives on a Prometheus
  2.x / 3.x holding the same samples: only the samples inside the range (``[t - w, t]``, 3.x
  ``(t - w, t]``), each bucket series extrapolated on its own (``slo.extrapolated_increase``),
  then added by ``le``. So an exported recording rule and Tailwatch's own evaluator agree.
  Raw snapshots only (the edges' samples are needed); a window older than the raw retention
  is refused.

A series whose bucket layout changes inside a window (a restart with new buckets) is refused
on both semantics with :class:`LayoutChangeError`, which names the target and the wall-clock
interval of the change. NOTE: why refuse rather than merge. ``le`` counts of different layouts
cannot be added bucket by bucket (Prometheus's ``sum by (le)`` does so into a union of bounds
and its monotonicity fix then reshapes the counts: a quantile from nowhere). The counts at the
bounds both layouts share could be added, but the quantile would then be interpolated over
silently coarser buckets and the result would look as precise as any other. Returning only the
latest segment would answer a different window than the one asked. The error says where the
change lies (``first_new_seconds``), so a caller that wants the latest segment asks for the
window from there, and knows that it did.
"""

from __future__ import annotations

import bisect
import enum
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

from collectors.store.models import RollupState, Series, Target
from slo import (
    ClassicHistogram,
    HistogramSnapshot,
    LayoutMismatchError,
    RangeSemantics,
    Sample,
    merge_histograms,
)
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


class WindowSemantics(enum.Enum):
    """Which samples a window takes, and whether it extrapolates."""

    EXACT = "exact"
    PROMETHEUS_2 = "prometheus-2"
    PROMETHEUS_3 = "prometheus-3"

    @property
    def range_semantics(self) -> RangeSemantics | None:
        """The Prometheus range rule imitated; ``None`` for the exact window."""
        return _RANGE_RULES.get(self)


_RANGE_RULES = {
    WindowSemantics.PROMETHEUS_2: RangeSemantics.PROMETHEUS_2,
    WindowSemantics.PROMETHEUS_3: RangeSemantics.PROMETHEUS_3,
}


def parse_semantics(value: object) -> WindowSemantics:
    """``value`` (a :class:`WindowSemantics`, ``slo.RangeSemantics`` or one of their strings)
    as a :class:`WindowSemantics`; a clear ``ValueError`` naming the value otherwise."""
    if isinstance(value, WindowSemantics):
        return value
    if isinstance(value, RangeSemantics):
        return WindowSemantics(value.value)
    try:
        return WindowSemantics(value)
    except ValueError:
        raise ValueError(
            f"semantics: expected 'exact' (last snapshot at or before each edge, no "
            f"extrapolation), 'prometheus-2' (Prometheus 2.x increase over [t - w, t]) or "
            f"'prometheus-3' (3.x, over (t - w, t]), got {value!r}"
        ) from None


def require_finite_edges(start: float, end: float, semantics: WindowSemantics) -> None:
    """A Prometheus range is evaluated at ``end`` over ``end - start``, on an integer
    millisecond clock: all three must be finite in milliseconds (the exact window takes any
    bounds: nothing lies outside an infinite one)."""
    if semantics is WindowSemantics.EXACT:
        return
    if not all(math.isfinite(x * 1000) for x in (start, end, end - start)):
        raise ValueError(
            f"semantics={semantics.value!r} needs a finite start and end (Unix seconds, "
            f"within ±1e305), got start={start!r} end={end!r}"
        )


class SeriesName(NamedTuple):
    """What an error says about a stored series."""

    family: str
    target: str


class LayoutChangeError(LayoutMismatchError):
    """A series' bucket layout changed inside the window asked for.

    The change lies between ``last_old_seconds`` (the last snapshot in the old layout, or the
    start of the minute holding the change once raw snapshots are past retention) and
    ``first_new_seconds``; ``left`` and ``right`` are the old and new layouts. An exact or
    ``prometheus-2`` window that starts at ``first_new_seconds`` reads the new layout only (a
    ``prometheus-3`` range leaves its start out: start it just before).
    """

    def __init__(
        self,
        series: SeriesName,
        last_old_seconds: float,
        first_new_seconds: float,
        left: tuple[float, ...],
        right: tuple[float, ...],
        *,
        is_exact: bool = True,
    ) -> None:
        where = "" if is_exact else " (within that minute; its raw snapshots are past retention)"
        super().__init__(
            f"the bucket layout of {series.family} on target {series.target!r} changed between "
            f"{format_utc(last_old_seconds)} and {format_utc(first_new_seconds)}{where}, from "
            f"{describe_layout(left)} to {describe_layout(right)}: counts of two layouts cannot "
            f"be added. Ask for the new layout from its first snapshot "
            f"({format_utc(first_new_seconds)}) on, or for the old one up to its last "
            f"({format_utc(last_old_seconds)})",
            left,
            right,
        )
        self.family = series.family
        self.target = series.target
        self.last_old_seconds = last_old_seconds
        self.first_new_seconds = first_new_seconds


def layouts_differ_error(
    first: SeriesName, left: tuple[float, ...], second: SeriesName, right: tuple[float, ...]
) -> LayoutMismatchError:
    """Two selected series (not one that changed) carry different layouts."""
    return LayoutMismatchError(
        f"selected series of {first.family} have different bucket layouts: target "
        f"{first.target!r} has {describe_layout(left)}, target {second.target!r} has "
        f"{describe_layout(right)}; merge only series with the same buckets (narrow the "
        "selector, e.g. by target)",
        left,
        right,
    )


def describe_layout(bounds: tuple[float, ...]) -> str:
    """``bounds`` in a few words: ``4 bounds (0.1, 0.5, 1, +Inf)``, long ones elided."""
    shown = [_bound(b) for b in bounds]
    if len(shown) > 6:
        shown = [*shown[:3], "…", *shown[-2:]]
    return f"{len(bounds)} bounds ({', '.join(shown)})"


def series_name(session: Session, sid: int) -> SeriesName:
    """The family and owning target of series ``sid``."""
    family, target = session.execute(
        select(Series.family, Target.name)
        .join(Target, Target.id == Series.target_id)
        .where(Series.id == sid)
    ).one()
    return SeriesName(family, target)


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


def _bound(bound: float) -> str:
    return "+Inf" if bound == math.inf else f"{bound:g}"
