"""Window arithmetic over cumulative snapshots: PromQL's ``rate``/``increase`` on counter
samples, the increase of whole histograms between snapshots (with counter resets), and the
merge of histograms that share a layout.

Two range semantics exist (``shared/reference/prometheus-slo.md`` §2, §1.5):
:attr:`RangeSemantics.PROMETHEUS_2` selects ``[t - r, t]`` (both ends included) and clamps the
extrapolation at the counter's zero point *before* the half-interval rule, as 2.42 does;
:attr:`RangeSemantics.PROMETHEUS_3` selects ``(t - r, t]`` and uses the >= 2.51 order.
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import NamedTuple, TypeVar

from slo.errors import LayoutMismatchError, SLOError
from slo.histogram import ClassicHistogram

#: Prometheus's default lookback for instant selectors.
DEFAULT_LOOKBACK_SECONDS = 300.0


class RangeSemantics(enum.Enum):
    """Which Prometheus a window imitates."""

    PROMETHEUS_2 = "prometheus-2"
    PROMETHEUS_3 = "prometheus-3"


class Sample(NamedTuple):
    """One counter or gauge reading."""

    timestamp_seconds: float
    value: float


class HistogramSnapshot(NamedTuple):
    """One scrape of a cumulative histogram."""

    timestamp_seconds: float
    histogram: ClassicHistogram


_Timed = TypeVar("_Timed", Sample, HistogramSnapshot)


def samples_in_range(
    samples: Iterable[_Timed],
    end_seconds: float,
    range_seconds: float,
    semantics: RangeSemantics = RangeSemantics.PROMETHEUS_3,
) -> list[_Timed]:
    """The samples (or histogram snapshots) a range selector ``[range]`` evaluated at
    ``end_seconds`` sees, in time order: 2.x takes ``[t - r, t]``, 3.x ``(t - r, t]``, both on
    Prometheus's integer-millisecond clock (times are rounded to whole milliseconds)."""
    end_ms = _whole_ms(end_seconds)
    start_ms = end_ms - _whole_ms(range_seconds)
    chosen = [
        s
        for s in samples
        if _is_in_range(_whole_ms(s.timestamp_seconds), start_ms, end_ms, semantics)
    ]
    return sorted(chosen, key=lambda s: s.timestamp_seconds)


def latest_at(
    samples: Iterable[Sample],
    at_seconds: float,
    lookback_seconds: float = DEFAULT_LOOKBACK_SECONDS,
    semantics: RangeSemantics = RangeSemantics.PROMETHEUS_3,
) -> float | None:
    """An instant selector's value: the newest sample within the lookback, or ``None``."""
    window = samples_in_range(samples, at_seconds, lookback_seconds, semantics)
    return window[-1].value if window else None


def counter_increase(values: Sequence[float]) -> float:
    """Increase of a counter across consecutive readings, without extrapolation.

    A reading lower than the one before is a reset: the counter restarted from zero, so the
    new reading itself is the increase since the restart. Fewer than two readings → 0.
    """
    result = values[-1] - values[0] if values else 0.0
    for previous, current in itertools.pairwise(values):
        if current < previous:
            result += previous
    return result


def extrapolated_increase(
    samples: Iterable[Sample],
    end_seconds: float,
    range_seconds: float,
    semantics: RangeSemantics = RangeSemantics.PROMETHEUS_3,
) -> float | None:
    """PromQL ``increase(counter[range])`` at ``end_seconds``; ``None`` with fewer than two
    samples in the window (Prometheus returns no series).

    Resets are handled as in :func:`counter_increase`; the result is then extrapolated to the
    window edges when the first/last sample lies within 110 % of the average spacing of them,
    else by half a spacing, and never below the counter's zero point. Hence non-integer values.

    Times are taken on whole milliseconds, as Prometheus stores them, and every duration is an
    integer millisecond difference divided by 1000, as Prometheus's ``extrapolatedRate``
    computes it, so the result is Prometheus's to the last bit for the same samples (float
    seconds would carry ~2.4e-7 s of rounding each at today's Unix times). Of two samples on
    one millisecond the first is kept, as Prometheus refuses the second.
    """
    end_ms = _whole_ms(end_seconds)
    start_ms = end_ms - _whole_ms(range_seconds)
    window: dict[int, float] = {}
    for sample in samples_in_range(samples, end_seconds, range_seconds, semantics):
        window.setdefault(_whole_ms(sample.timestamp_seconds), sample.value)
    if len(window) < 2:
        return None
    times = sorted(window)
    result = counter_increase([window[t] for t in times])
    first_ms, last_ms, first_value = times[0], times[-1], window[times[0]]
    to_start = (first_ms - start_ms) / 1000
    to_end = (end_ms - last_ms) / 1000
    sampled = (last_ms - first_ms) / 1000
    average = sampled / (len(times) - 1)
    threshold = average * 1.1
    can_clamp = result > 0 and first_value >= 0
    if semantics is RangeSemantics.PROMETHEUS_2:
        if can_clamp:
            to_start = min(to_start, sampled * (first_value / result))
        if to_start >= threshold:
            to_start = average / 2
    else:
        if to_start >= threshold:
            to_start = average / 2
        if can_clamp:
            to_start = min(to_start, sampled * (first_value / result))
    if to_end >= threshold:
        to_end = average / 2
    return result * ((sampled + to_start + to_end) / sampled)


def prometheus_histogram_increase(
    snapshots: Sequence[HistogramSnapshot],
    end_seconds: float,
    range_seconds: float,
    semantics: RangeSemantics = RangeSemantics.PROMETHEUS_3,
) -> ClassicHistogram | None:
    """PromQL ``increase(<family>_bucket[range])`` at ``end_seconds`` for one histogram series:
    each bucket series through :func:`extrapolated_increase` on its own (its own resets, its
    own zero-point clamp), as Prometheus evaluates ``_bucket`` series; ``sum_value`` likewise
    from the ``_sum`` readings (``None`` when one is missing). ``sum by (le)`` over several
    series is :func:`merge_histograms` of the results (exact for two series; with more,
    Prometheus adds in an order of its own, which can move the last bit).

    Unlike :func:`histogram_increase` this takes only the snapshots inside the range and
    extrapolates. ``None`` with fewer than two snapshots in the range. The snapshots in the
    range must share one layout (:class:`LayoutMismatchError`: Prometheus would extrapolate
    the old and the new ``le`` series separately and add them into a union of bounds).
    """
    inside = samples_in_range(snapshots, end_seconds, range_seconds, semantics)
    if len({_whole_ms(s.timestamp_seconds) for s in inside}) < 2:
        return None
    layout = inside[0].histogram.upper_bounds
    for snapshot in inside[1:]:
        _require_same_layout(
            layout, snapshot.histogram.upper_bounds, f"at {format_utc(snapshot.timestamp_seconds)}"
        )
    counts = []
    for i in range(len(layout)):
        bucket = [Sample(s.timestamp_seconds, s.histogram.cumulative_counts[i]) for s in inside]
        increase = extrapolated_increase(bucket, end_seconds, range_seconds, semantics)
        assert increase is not None  # two distinct milliseconds are inside
        counts.append(increase)
    sums = [s.histogram.sum_value for s in inside]
    total_sum = (
        None
        if None in sums
        else extrapolated_increase(
            [Sample(s.timestamp_seconds, v) for s, v in zip(inside, sums, strict=True)],
            end_seconds,
            range_seconds,
            semantics,
        )
    )
    return ClassicHistogram(layout, tuple(counts), total_sum)


def extrapolated_rate(
    samples: Iterable[Sample],
    end_seconds: float,
    range_seconds: float,
    semantics: RangeSemantics = RangeSemantics.PROMETHEUS_3,
) -> float | None:
    """PromQL ``rate(counter[range])``: :func:`extrapolated_increase` per second of range."""
    increase = extrapolated_increase(samples, end_seconds, range_seconds, semantics)
    return None if increase is None else increase / range_seconds


def merge_histograms(histograms: Iterable[ClassicHistogram]) -> ClassicHistogram:
    """Add histograms with identical layouts (replicas, tenants, routes) into one.

    Raises :class:`LayoutMismatchError` when layouts differ: adding counts across different
    bounds would misplace observations (Prometheus silently unions the bounds and reshapes the
    counts). Raises :class:`SLOError` when given nothing. ``sum_value`` is kept only when every
    input has one.
    """
    items = list(histograms)
    if not items:
        raise SLOError("no histograms to merge; pass at least one")
    first = items[0]
    counts = list(first.cumulative_counts)
    for other in items[1:]:
        _require_same_layout(first.upper_bounds, other.upper_bounds, "merge")
        counts = [a + b for a, b in zip(counts, other.cumulative_counts, strict=True)]
    sums = [h.sum_value for h in items]
    total_sum = None if None in sums else math.fsum(sums)
    return ClassicHistogram(first.upper_bounds, tuple(counts), total_sum)


def histogram_increase(snapshots: Sequence[HistogramSnapshot]) -> ClassicHistogram | None:
    """The distribution observed between the first and last snapshot, resets included.

    Snapshots must share one layout (:class:`LayoutMismatchError` otherwise: a restart with new
    buckets splits the window in two). A reset is any bucket's cumulative count going down
    between consecutive snapshots; the whole histogram then restarted from zero, so that
    segment contributes the later snapshot as is. (Per-bucket reset handling, which PromQL's
    ``rate`` on ``_bucket`` series does, under-counts buckets that grew back past their old
    value.) No extrapolation. ``None`` with fewer than two snapshots.
    """
    ordered = sorted(snapshots, key=lambda s: s.timestamp_seconds)
    if len(ordered) < 2:
        return None
    layout = ordered[0].histogram.upper_bounds
    counts = [0.0] * len(layout)
    total_sum: float | None = 0.0
    for previous, current in itertools.pairwise(ordered):
        before, after = previous.histogram, current.histogram
        _require_same_layout(
            layout, after.upper_bounds, f"at {format_utc(current.timestamp_seconds)}"
        )
        pairs = list(zip(after.cumulative_counts, before.cumulative_counts, strict=True))
        is_reset = any(a < b for a, b in pairs)
        for i, (a, b) in enumerate(pairs):
            counts[i] += a if is_reset else a - b
        if total_sum is not None and before.sum_value is not None and after.sum_value is not None:
            total_sum += after.sum_value if is_reset else after.sum_value - before.sum_value
        else:
            total_sum = None
    return ClassicHistogram(layout, tuple(counts), total_sum)


def histogram_rate(snapshots: Sequence[HistogramSnapshot]) -> ClassicHistogram | None:
    """:func:`histogram_increase` per second between the first and last snapshot."""
    increase = histogram_increase(snapshots)
    if increase is None:
        return None
    times = [s.timestamp_seconds for s in snapshots]
    elapsed = max(times) - min(times)
    if elapsed <= 0:
        raise SLOError(f"snapshots span {elapsed} s; a rate needs two distinct timestamps")
    return increase.scaled(1.0 / elapsed)


def _require_same_layout(left: tuple[float, ...], right: tuple[float, ...], where: str) -> None:
    if left == right:
        return
    differing = next(
        (i for i, (a, b) in enumerate(zip(left, right, strict=False)) if a != b),
        min(len(left), len(right)),
    )
    raise LayoutMismatchError(
        f"bucket layouts differ ({where}): {len(left)} vs {len(right)} bounds, first difference "
        f"at position {differing} ({_bound_at(left, differing)} vs {_bound_at(right, differing)}); "
        "merge only series with the same buckets, or query them separately",
        left,
        right,
    )


def _bound_at(bounds: tuple[float, ...], index: int) -> str:
    return f"le={bounds[index]}" if index < len(bounds) else "nothing"


def format_utc(unix_seconds: float) -> str:
    """``unix_seconds`` as ISO-8601 UTC to the millisecond, e.g. ``2026-12-01T21:10:27.123Z``:
    what an error shows instead of ``1.79615e+09``."""
    try:
        moment = datetime.fromtimestamp(unix_seconds, tz=UTC)
    except (ValueError, OverflowError, OSError):  # NaN, inf, past year 9999
        return f"{unix_seconds!r} (Unix seconds)"
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _whole_ms(seconds: float) -> int:
    """Unix seconds on Prometheus's integer-millisecond clock."""
    milliseconds = seconds * 1000
    if not math.isfinite(milliseconds):
        raise SLOError(
            f"time {seconds!r} s has no place on Prometheus's millisecond clock; give finite "
            "seconds (within ±1e305)"
        )
    return round(milliseconds)


def _is_in_range(t_ms: int, start_ms: int, end_ms: int, semantics: RangeSemantics) -> bool:
    """2.x ranges include their start, 3.x ranges do not; both include their end."""
    if semantics is RangeSemantics.PROMETHEUS_2:
        return start_ms <= t_ms <= end_ms
    return start_ms < t_ms <= end_ms
