"""Invariants of merging and quantiles, checked with hypothesis on random data and layouts."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

import slo
from slo import ClassicHistogram, ExponentialHistogram, exponential_quantile

SETTINGS = settings(max_examples=60, deadline=None)

layouts = st.lists(
    st.floats(0.001, 1000, allow_nan=False), min_size=1, max_size=8, unique=True
).map(sorted)
latencies = st.floats(0, 2000, allow_nan=False)
positive = st.floats(1e-6, 1e6, allow_nan=False)
quantiles = st.floats(0, 1)
scales = st.integers(-2, 6)


def data_with_bound_hits(bounds: list[float]) -> st.SearchStrategy[list[float]]:
    """Observations that often sit exactly on a bound, where off-by-one errors hide."""
    return st.lists(st.one_of(latencies, st.sampled_from(bounds)), min_size=1, max_size=60)


def exact_quantile(values: list[float], q: float) -> float:
    """The smallest observation with at least q * n observations at or below it."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


@SETTINGS
@given(st.data(), layouts)
def test_classic_merge_is_associative_and_commutative(data, bounds) -> None:
    a, b, c = (
        ClassicHistogram.from_observations(data.draw(data_with_bound_hits(bounds)), bounds)
        for _ in range(3)
    )
    merge = slo.merge_histograms
    assert (
        merge([merge([a, b]), c]).cumulative_counts == merge([a, merge([b, c])]).cumulative_counts
    )
    assert merge([a, b]).cumulative_counts == merge([b, a]).cumulative_counts


@SETTINGS
@given(st.data(), layouts, quantiles)
def test_quantile_of_a_merge_is_the_quantile_of_the_concatenation(data, bounds, q) -> None:
    parts = [data.draw(data_with_bound_hits(bounds)) for _ in range(3)]
    merged = slo.merge_histograms(ClassicHistogram.from_observations(p, bounds) for p in parts)
    whole = ClassicHistogram.from_observations([v for p in parts for v in p], bounds)
    assert merged.cumulative_counts == whole.cumulative_counts
    assert merged.quantile(q) == whole.quantile(q) or all(
        math.isnan(x) for x in (merged.quantile(q).value, whole.quantile(q).value)
    )


@SETTINGS
@given(st.data(), layouts, st.lists(quantiles, min_size=2, max_size=6))
def test_classic_quantiles_are_monotone_in_q(data, bounds, qs) -> None:
    histogram = ClassicHistogram.from_observations(data.draw(data_with_bound_hits(bounds)), bounds)
    values = [histogram.quantile(q).value for q in sorted(qs)]
    finite = [v for v in values if not math.isnan(v)]
    assert finite == sorted(finite)


@SETTINGS
@given(st.data(), layouts, quantiles)
def test_classic_interval_contains_the_exact_quantile(data, bounds, q) -> None:
    values = data.draw(data_with_bound_hits(bounds))
    result = ClassicHistogram.from_observations(values, bounds).quantile(q)
    exact = exact_quantile(values, q)
    assert result.lower_bound <= exact <= result.upper_bound
    assert result.in_inf_bucket == (exact > bounds[-1])
    if not math.isnan(result.value):
        assert result.lower_bound <= result.value <= result.upper_bound


@SETTINGS
@given(
    st.lists(st.tuples(st.lists(positive, max_size=30), scales), min_size=3, max_size=3),
)
def test_exponential_merge_is_associative_and_commutative(parts) -> None:
    a, b, c = (ExponentialHistogram.from_observations(v, s) for v, s in parts)
    merge = slo.merge_exponential_histograms
    assert merge([merge([a, b]), c]) == merge([a, merge([b, c])])
    assert merge([a, b]) == merge([b, a])


@SETTINGS
@given(st.lists(st.lists(positive, min_size=1, max_size=30), min_size=2, max_size=3), scales)
def test_exponential_merge_equals_recording_the_concatenation(parts, scale) -> None:
    merged = slo.merge_exponential_histograms(
        ExponentialHistogram.from_observations(p, scale + i) for i, p in enumerate(parts)
    )
    whole = ExponentialHistogram.from_observations([v for p in parts for v in p], scale)
    assert merged == whole


@SETTINGS
@given(st.lists(positive, min_size=1, max_size=80), scales, quantiles)
def test_exponential_quantile_bounds_hold(values, scale, q) -> None:
    histogram = ExponentialHistogram.from_observations(values, scale)
    result = exponential_quantile(histogram, q)
    exact = exact_quantile(values, q)
    assert result.lower_bound < exact <= result.upper_bound
    assert abs(result.value - exact) <= result.relative_error_bound * exact * (1 + 1e-12)


@SETTINGS
@given(st.lists(positive, min_size=1, max_size=60), scales, st.lists(quantiles, min_size=2))
def test_exponential_quantiles_are_monotone_in_q(values, scale, qs) -> None:
    histogram = ExponentialHistogram.from_observations(values, scale)
    estimates = [exponential_quantile(histogram, q).value for q in sorted(qs)]
    assert estimates == sorted(estimates)
