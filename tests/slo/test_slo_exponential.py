"""OpenTelemetry exponential histograms: indexing, downscaling, merging, quantile bounds."""

from __future__ import annotations

import math

import pytest

import slo
from slo import ExponentialHistogram, bucket_index, bucket_lower_boundary, exponential_quantile


@pytest.mark.parametrize(
    ("value", "scale", "expected"),
    [
        (1.0, 0, -1),  # 1 is the upper boundary of (0.5, 1]
        (1.5, 0, 0),
        (2.0, 0, 0),
        (2.0001, 0, 1),
        (4.0, -1, 0),  # base 4: (1, 4]
        (4.1, -1, 1),
        (0.25, 0, -3),
        (1.0, 3, -1),
        (2.0, 3, 7),
        (math.sqrt(2), 1, 0),  # base sqrt(2): (1, sqrt 2]
        (1.5, 1, 1),
    ],
)
def test_bucket_index(value: float, scale: int, expected: int) -> None:
    assert bucket_index(value, scale) == expected


@pytest.mark.parametrize("scale", [-3, 0, 2, 5, 8])
def test_index_agrees_with_reported_boundaries(scale: int) -> None:
    for k in range(1, 400):
        value = 1e-4 * 1.037**k
        index = bucket_index(value, scale)
        assert bucket_lower_boundary(index, scale) < value
        assert value <= bucket_lower_boundary(index + 1, scale)


def test_base_and_error_bound() -> None:
    h = ExponentialHistogram(scale=3)
    assert h.base == pytest.approx(2 ** (1 / 8))
    assert h.relative_error_bound == pytest.approx((h.base - 1) / (h.base + 1))
    assert ExponentialHistogram(scale=0).relative_error_bound == pytest.approx(1 / 3)
    assert ExponentialHistogram(scale=-10).relative_error_bound == 1.0  # base 2**1024 overflows


def test_downscale_merges_neighbours() -> None:
    h = ExponentialHistogram(scale=2, positive_offset=-3, positive_counts=(1, 2, 3, 4, 5))
    down = h.downscaled(1)  # indexes -3..1 -> -2, -1, -1, 0, 0
    assert (down.scale, down.positive_offset, down.positive_counts) == (1, -2, (1, 5, 9))
    assert down.total_count == h.total_count
    with pytest.raises(slo.SLOError, match="only lose resolution"):
        h.downscaled(-1)


def test_merge_across_scales_equals_recording_at_the_lowest_scale() -> None:
    values_a = [0.01 * 1.3**k for k in range(40)]
    values_b = [0.02 * 1.17**k for k in range(60)]
    merged = slo.merge_exponential_histograms(
        [
            ExponentialHistogram.from_observations(values_a, scale=5),
            ExponentialHistogram.from_observations(values_b, scale=2),
        ]
    )
    assert merged == ExponentialHistogram.from_observations(values_a + values_b, scale=2)


def test_merge_respects_max_num_buckets() -> None:
    values = [1e-3 * 1.01**k for k in range(2000)]
    merged = slo.merge_exponential_histograms(
        [ExponentialHistogram.from_observations(values, scale=6)], max_num_buckets=160
    )
    assert len(merged.positive_counts) <= 160
    assert merged == ExponentialHistogram.from_observations(values, scale=merged.scale)


def test_merge_moves_buckets_under_a_larger_zero_threshold() -> None:
    a = ExponentialHistogram.from_observations([0.001, 0.002, 5.0], scale=0)
    b = ExponentialHistogram.from_observations([0.0, 7.0], scale=0, zero_threshold=0.01)
    merged = slo.merge_exponential_histograms([a, b])
    assert merged.zero_threshold == 0.01
    assert merged.zero_count == 3
    assert merged.total_count == 5


@pytest.mark.parametrize("scale", [0, 2, 5])
def test_quantile_is_within_the_relative_bound(scale: int) -> None:
    values = sorted(0.005 * 1.11**k for k in range(300))
    h = ExponentialHistogram.from_observations(values, scale=scale)
    for q in (0.01, 0.25, 0.5, 0.9, 0.99, 1.0):
        exact = values[max(0, math.ceil(q * len(values)) - 1)]
        result = exponential_quantile(h, q)
        assert result.lower_bound < exact <= result.upper_bound
        assert abs(result.value - exact) / exact <= h.relative_error_bound * (1 + 1e-12)
        assert result.relative_error_bound == h.relative_error_bound


def test_quantile_edge_rules() -> None:
    h = ExponentialHistogram.from_observations([1.0, 2.0], scale=1)
    assert math.isnan(exponential_quantile(h, math.nan).value)
    assert exponential_quantile(h, -0.1).value == -math.inf
    assert exponential_quantile(h, 1.5).value == math.inf
    assert math.isnan(exponential_quantile(ExponentialHistogram(scale=1), 0.5).value)


def test_zero_and_negative_buckets() -> None:
    h = ExponentialHistogram.from_observations([-4.0, -1.0, 0.0, 0.0, 3.0], scale=0)
    zero = exponential_quantile(h, 0.6)
    assert zero.in_zero_bucket and zero.value == 0.0 and zero.relative_error_bound == 0.0
    lowest = exponential_quantile(h, 0.1)  # -4 lives in (-4, -2] mirrored: [-4, -2)
    assert (lowest.lower_bound, lowest.upper_bound) == (-4.0, -2.0)
    assert lowest.value == pytest.approx(-2 * 2 * 4 / 6)
    wide = ExponentialHistogram.from_observations([0.001, 5.0], scale=0, zero_threshold=0.01)
    assert exponential_quantile(wide, 0.5).relative_error_bound == math.inf


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"scale": 21}, "outside"),
        ({"scale": 0, "zero_threshold": -1.0}, "zero_threshold"),
        ({"scale": 0, "positive_counts": (1, -1)}, ">= 0"),
    ],
)
def test_validation(kwargs, match) -> None:
    with pytest.raises(slo.SLOError, match=match):
        ExponentialHistogram(**kwargs)


def test_non_finite_observations_are_refused() -> None:
    with pytest.raises(slo.SLOError, match="not finite"):
        ExponentialHistogram.from_observations([1.0, math.nan], scale=0)
