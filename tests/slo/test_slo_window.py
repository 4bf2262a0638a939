"""rate/increase over counter samples, histogram windows with resets, merges and layouts."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import slo
from slo import ClassicHistogram, HistogramSnapshot, RangeSemantics, Sample
from slo.window import format_utc, prometheus_histogram_increase

P2, P3 = RangeSemantics.PROMETHEUS_2, RangeSemantics.PROMETHEUS_3
INF = math.inf


def minutes(values: list[float | None]) -> list[Sample]:
    """One sample a minute from t=0; None leaves a gap (the scripts' ``_``)."""
    return [Sample(60.0 * i, v) for i, v in enumerate(values) if v is not None]


@pytest.mark.parametrize(
    ("samples", "end", "range_", "semantics", "expected"),
    [
        # shared/reference/prometheus-slo.md §2 table (2.42 column verified by promtool).
        (minutes([10.0 * i for i in range(21)]), 600, 300, P2, 50.0),
        (minutes([10.0 * i for i in range(21)]), 600, 60, P2, 10.0),  # rate 0.1666…
        (minutes([100, 110, 120, 5, 15, 25]), 300, 300, P2, 45.0),
        (minutes([None] * 7 + [3, 13, 23]), 540, 300, P2, 23.0),
        (minutes([None] * 7 + [10, 20, 30]), 540, 300, P2, 30.0),
        (minutes([None] * 7 + [10, 20, 30]), 540, 300, P3, 25.0),
    ],
)
def test_extrapolated_increase_matches_prometheus(samples, end, range_, semantics, expected):
    assert math.isclose(slo.extrapolated_increase(samples, end, range_, semantics), expected)


def test_left_open_window_drops_the_sample_at_its_start() -> None:
    samples = minutes([10.0 * i for i in range(21)])
    assert slo.extrapolated_rate(samples, 600, 60, P3) is None  # one sample in (9m, 10m]
    assert len(slo.samples_in_range(samples, 600, 60, P2)) == 2


def test_latest_at_uses_the_lookback() -> None:
    samples = [Sample(0, 1.0), Sample(300, 2.0)]
    assert slo.latest_at(samples, 420) == 2.0
    assert slo.latest_at(samples, 601) is None
    assert slo.latest_at(samples, 600, semantics=P2) == 2.0
    assert slo.latest_at(samples, 600, semantics=P3) is None


@pytest.mark.parametrize(
    ("values", "expected"),
    [([], 0.0), ([5], 0.0), ([1, 4, 9], 8.0), ([100, 110, 120, 5, 15, 25], 45.0), ([3, 0], 0.0)],
)
def test_counter_increase_handles_resets(values, expected) -> None:
    assert slo.counter_increase(values) == expected


LAYOUT = (0.1, 0.5, 1.0, INF)


def hist(counts: tuple[float, ...], total_sum: float | None = None) -> ClassicHistogram:
    return ClassicHistogram(LAYOUT, counts, total_sum)


def test_histogram_increase_without_reset_is_the_difference() -> None:
    snapshots = [
        HistogramSnapshot(0, hist((1, 2, 3, 4), 2.0)),
        HistogramSnapshot(60, hist((3, 5, 8, 9), 6.5)),
        HistogramSnapshot(120, hist((4, 7, 10, 12), 9.0)),
    ]
    increase = slo.histogram_increase(snapshots)
    assert increase == hist((3, 5, 7, 8), 7.0)
    rate = slo.histogram_rate(snapshots)
    assert rate is not None and rate.cumulative_counts == (3 / 120, 5 / 120, 7 / 120, 8 / 120)


def test_histogram_reset_restarts_the_whole_histogram() -> None:
    # The replica restarted between t=60 and t=120: the total fell, so every bucket restarted,
    # including le=0.1 whose new count (6) happens to exceed the old one (5).
    snapshots = [
        HistogramSnapshot(0, hist((2, 4, 6, 8))),
        HistogramSnapshot(60, hist((5, 9, 12, 15))),
        HistogramSnapshot(120, hist((6, 6, 7, 7))),
        HistogramSnapshot(180, hist((7, 8, 9, 10))),
    ]
    increase = slo.histogram_increase(snapshots)
    assert increase.cumulative_counts == (3 + 6 + 1, 5 + 6 + 2, 6 + 7 + 2, 7 + 7 + 3)
    assert increase.sum_value is None


def test_histogram_increase_needs_two_snapshots() -> None:
    assert slo.histogram_increase([HistogramSnapshot(0, hist((1, 1, 1, 1)))]) is None


def test_layout_change_inside_a_window_is_refused() -> None:
    other = ClassicHistogram((0.1, 0.25, 1.0, INF), (1, 2, 3, 4))
    snapshots = [HistogramSnapshot(0, hist((1, 2, 3, 4))), HistogramSnapshot(60, other)]
    with pytest.raises(slo.LayoutMismatchError, match=r"position 1 \(le=0.5 vs le=0.25\)"):
        slo.histogram_increase(snapshots)


def test_merge_adds_counts_and_sums() -> None:
    merged = slo.merge_histograms([hist((1, 2, 3, 4), 1.0), hist((0, 1, 1, 2), 0.5)])
    assert merged == hist((1, 3, 4, 6), 1.5)
    assert slo.merge_histograms([hist((1, 2, 3, 4), 1.0), hist((1, 1, 1, 1))]).sum_value is None


def test_merge_refuses_mismatched_layouts_with_an_actionable_error() -> None:
    vllm_ttft = ClassicHistogram.from_observations([0.3], [0.001, 0.005, 0.01])
    other = ClassicHistogram.from_observations([0.3], [0.001, 0.005])
    with pytest.raises(slo.LayoutMismatchError) as caught:
        slo.merge_histograms([vllm_ttft, other])
    message = str(caught.value)
    assert "4 vs 3 bounds" in message and "same buckets" in message
    assert caught.value.left == (0.001, 0.005, 0.01, INF)
    assert caught.value.right == (0.001, 0.005, INF)
    assert isinstance(caught.value, ValueError)


def test_merge_of_nothing_is_an_error() -> None:
    with pytest.raises(slo.SLOError, match="at least one"):
        slo.merge_histograms([])


@pytest.mark.parametrize(
    ("bounds", "counts", "match"),
    [
        ((0.1, 1.0), (1, 2), r"must be \+Inf"),
        ((0.1, 0.1, INF), (1, 2, 3), "strictly increasing"),
        ((0.1, INF), (1,), "1 counts"),
        ((0.1, INF), (1, -1), "finite and >= 0"),
        ((0.1, INF), (1, math.nan), "finite and >= 0"),
    ],
)
def test_classic_histogram_validation(bounds, counts, match) -> None:
    with pytest.raises(slo.SLOError, match=match):
        ClassicHistogram(bounds, counts)


def test_from_buckets_sorts_and_coalesces() -> None:
    built = ClassicHistogram.from_buckets([(INF, 4), (0.2, 1), (0.1, 1), (2e-1, 1)])
    assert built == ClassicHistogram((0.1, 0.2, INF), (1, 2, 4))


def test_from_observations_counts_le_inclusively() -> None:
    built = ClassicHistogram.from_observations([0.1, 0.10001, 5.0, 99.0], [0.1, 1.0, 10.0])
    assert built.cumulative_counts == (1, 2, 3, 4)
    assert built.total_count == 4 and built.sum_value == pytest.approx(104.20001)


# -- Prometheus's millisecond clock and per-bucket increase ----------------------------------

#: 2026-12-01T21:00:00Z: where float seconds carry ~2.4e-7 s of rounding.
NOW = 1_796_158_800.0


@settings(max_examples=60, deadline=None)
@given(
    shift_ms=st.integers(0, 10**13),
    gaps_ms=st.lists(st.integers(1, 90_000), min_size=2, max_size=8),
    increments=st.lists(st.integers(0, 1000), min_size=8, max_size=8),
    before_ms=st.integers(0, 30_000),
    after_ms=st.integers(0, 30_000),
    semantics=st.sampled_from([P2, P3]),
)
def test_increase_depends_only_on_whole_millisecond_differences(
    shift_ms, gaps_ms, increments, before_ms, after_ms, semantics
) -> None:
    """As in Prometheus, every duration is an integer-ms difference: moving the samples and
    the range by a whole number of milliseconds (to today's Unix times, or anywhere) cannot
    change a single bit of the result."""
    times = [sum(gaps_ms[:i]) for i in range(len(gaps_ms) + 1)]
    values = [float(sum(increments[: i + 1])) for i in range(len(times))]
    end_ms = times[-1] + after_ms
    range_ms = end_ms - times[0] + before_ms + (1 if semantics is P3 else 0)

    def at(offset_ms: int) -> float | None:
        samples = [Sample((t + offset_ms) / 1000, v) for t, v in zip(times, values, strict=True)]
        return slo.extrapolated_increase(
            samples, (end_ms + offset_ms) / 1000, range_ms / 1000, semantics
        )

    assert at(0) is not None
    assert at(shift_ms) == at(0)
    assert at(round(NOW * 1000)) == at(0)


def test_each_bucket_series_extrapolates_on_its_own() -> None:
    # [0, 30] at 30, snapshots at 5, 15, 25. le=0.1 goes 0, 5, 10: its zero point is at the
    # first sample, so nothing is extrapolated back: 10 * 25/20. +Inf goes 10, 15, 20: 5 s
    # each way: 10 * 30/20. The cumulative counts no longer share one factor.
    snapshots = [
        HistogramSnapshot(NOW + t, ClassicHistogram((0.1, INF), (a, b), s))
        for t, a, b, s in [(5, 0.0, 10.0, 1.0), (15, 5.0, 15.0, 2.0), (25, 10.0, 20.0, 3.0)]
    ]
    got = prometheus_histogram_increase(snapshots, NOW + 30, 30, P2)
    assert got == ClassicHistogram((0.1, INF), (12.5, 15.0), 2 * 30 / 20)
    assert prometheus_histogram_increase(snapshots, NOW + 30, 10, P2) is None  # one inside
    # 3.x leaves the range's start out: at 25 over 20 s only 15 and 25 are inside.
    got = prometheus_histogram_increase(snapshots, NOW + 25, 20, P3)
    assert got.cumulative_counts == (5.0 * 20 / 10, 5.0 * 20 / 10)


def test_prometheus_histogram_increase_refuses_a_layout_change_with_its_time() -> None:
    snapshots = [
        HistogramSnapshot(NOW, ClassicHistogram((0.1, INF), (1.0, 2.0))),
        HistogramSnapshot(NOW + 15.5, ClassicHistogram((0.5, INF), (1.0, 2.0))),
    ]
    with pytest.raises(slo.LayoutMismatchError, match=r"at 2026-12-01T21:00:15\.500Z"):
        prometheus_histogram_increase(snapshots, NOW + 20, 30)
    with pytest.raises(slo.LayoutMismatchError, match=r"at 2026-12-01T21:00:15\.500Z"):
        slo.histogram_increase(snapshots)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (NOW, "2026-12-01T21:00:00.000Z"),
        (NOW + 0.0015, "2026-12-01T21:00:00.001Z"),
        (0.0, "1970-01-01T00:00:00.000Z"),
        (math.inf, "inf (Unix seconds)"),
        (math.nan, "nan (Unix seconds)"),
        (1e300, "1e+300 (Unix seconds)"),
    ],
)
def test_format_utc(seconds, text) -> None:
    assert format_utc(seconds) == text
