"""histogram_quantile / histogram_fraction edge rules and bucket parsing, table-driven."""

from __future__ import annotations

import math

import pytest

import slo
from slo import Bucket, histogram_fraction, histogram_quantile, parse_le

INF, NAN = math.inf, math.nan
POSITIVE = [(0.1, 50), (0.2, 70), (1.0, 110), (INF, 120)]  # testhistogram{start="positive"} @50m
NEGATIVE = [(-0.2, 10), (-0.1, 20), (0.3, 20), (INF, 30)]


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=0)


@pytest.mark.parametrize(
    ("name", "q", "buckets", "expected"),
    [
        ("q NaN", NAN, POSITIVE, NAN),
        ("q below 0", -0.1, POSITIVE, -INF),
        ("q above 1", 1.01, POSITIVE, INF),
        ("q below 0 checked before the +Inf rule", -1, [(1.0, 3)], -INF),
        ("q above 1 checked before empty input", 2, [], INF),
        ("no buckets", 0.5, [], NAN),
        ("no +Inf bucket", 0.5, [(0.1, 1), (1.0, 3)], NAN),
        ("only +Inf", 0.5, [(INF, 5)], NAN),
        ("+inf and +Inf coalesce to one bucket", 0.5, [(INF, 0), (INF, 0)], NAN),
        ("empty histogram", 0.5, [(0.1, 0), (0.2, 0), (INF, 0)], NAN),
        ("interpolate from 0 in the lowest bucket", 0.2, POSITIVE, 0.048),
        ("middle bucket", 0.5, POSITIVE, 0.15),
        ("upper bucket", 0.8, POSITIVE, 0.72),
        ("q=1 with observations in +Inf: highest finite bound", 1, POSITIVE, 1.0),
        (
            "q=1: the first bound holding every observation",
            1,
            [(1, 5), (2, 10), (3, 10), (INF, 10)],
            2.0,
        ),
        ("q=0 positive lowest bucket", 0, POSITIVE, 0.0),
        ("q=0 empty positive lowest bucket is 0/0", 0, [(1.0, 0), (2.0, 4), (INF, 5)], NAN),
        ("lowest bound <= 0 is returned as is", 0.2, NEGATIVE, -0.2),
        ("q=0 negative lowest bound", 0, NEGATIVE, -0.2),
        ("negative interpolation", 0.5, NEGATIVE, -0.15),
        ("rank in +Inf bucket -> highest finite bound", 0.8, NEGATIVE, 0.3),
        ("unsorted input", 0.5, list(reversed(POSITIVE)), 0.15),
        (
            "duplicate le spellings add up",
            0.5,
            [(0.1, 10), (0.2, 10), (0.2, 10), (0.2, 10), (INF, 40)],
            0.15,
        ),
        (
            "non-monotonic: q=0.5 after the envelope fix",
            0.5,
            [(0.1, 20), (1, 10), (10, 50), (100, 40), (1000, 90), (INF, 80)],
            8.5,
        ),
        (
            "non-monotonic: q=0.99",
            0.99,
            [(0.1, 20), (1, 10), (10, 50), (100, 40), (1000, 90), (INF, 80)],
            979.75,
        ),
        ("middle of the bucket", 0.5, [(0, 0), (2, 10), (4, 20), (6, 30), (INF, 30)], 3.0),
    ],
)
def test_histogram_quantile_edge_rules(name, q, buckets, expected) -> None:
    assert same(histogram_quantile(q, buckets).value, expected), name


def test_rank_in_the_inf_bucket_is_capped_and_flagged() -> None:
    result = histogram_quantile(0.99, [(0.1, 10), (1.0, 20), (INF, 100)])
    assert result.value == 1.0
    assert result.in_inf_bucket
    assert (result.lower_bound, result.upper_bound) == (1.0, INF)


def test_interval_is_the_bucket_holding_the_rank() -> None:
    result = histogram_quantile(0.5, POSITIVE)
    assert (result.lower_bound, result.upper_bound) == (0.1, 0.2)
    assert result.lower_bound <= result.value <= result.upper_bound
    assert not result.in_inf_bucket
    first = histogram_quantile(0.2, POSITIVE)
    assert (first.lower_bound, first.upper_bound) == (0.0, 0.1)
    signed = histogram_quantile(0.2, POSITIVE, assume_non_negative=False)
    assert (signed.lower_bound, signed.value) == (-INF, 0.048)


def test_q0_interval_names_the_first_non_empty_bucket() -> None:
    result = histogram_quantile(0, [(1.0, 0), (2.0, 4), (INF, 5)])
    assert math.isnan(result.value)  # Prometheus: 0/0 in the empty lowest bucket
    assert (result.lower_bound, result.upper_bound) == (1.0, 2.0)


def test_forced_monotonicity_is_reported_but_float_noise_is_not() -> None:
    forced = histogram_quantile(0.5, [(0.1, 20), (1, 10), (INF, 30)])
    assert forced.has_forced_monotonicity
    noise = [(0.1, 10.0), (1.0, 20.0), (2.0, 20.0 - 1e-14), (INF, 20.0)]
    assert not histogram_quantile(0.5, noise).has_forced_monotonicity
    # 2.42 had no tolerance: the same noise is a forced fix there.
    assert histogram_quantile(0.5, noise, small_delta_tolerance=0.0).has_forced_monotonicity


def test_out_of_range_q_has_no_interval() -> None:
    for q in (NAN, -0.5, 1.5):
        result = histogram_quantile(q, POSITIVE)
        assert math.isnan(result.lower_bound) and math.isnan(result.upper_bound)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.1", 0.1),
        (".2", 0.2),
        ("2e-1", 0.2),
        ("2.0e-1", 0.2),
        ("1e0", 1.0),
        ("1", 1.0),
        ("1.", 1.0),
        ("-0.1", -0.1),
        ("+Inf", INF),
        ("+inf", INF),
        ("Inf", INF),
        ("infinity", INF),
        ("-Inf", -INF),
        ("0x1p-3", 0.125),
        ("", None),
        ("Hello World", None),
        ("NaN", None),
        ("1e400", None),
        (" 1", None),
        ("1_000", None),
        ("0x10", None),
    ],
)
def test_parse_le_follows_go_parse_float(text: str, expected: float | None) -> None:
    assert parse_le(text) == expected


def test_group_bucket_samples_skips_bad_le_and_drops_name() -> None:
    samples = [
        ({"__name__": "x_bucket", "job": "a", "le": "0.1"}, 1.0),
        ({"__name__": "x_bucket", "job": "a", "le": "+Inf"}, 2.0),
        ({"__name__": "x_bucket", "job": "a", "le": "oops"}, 5.0),
        ({"__name__": "x_bucket", "job": "b"}, 7.0),
    ]
    grouped = slo.group_bucket_samples(samples)
    assert grouped.skipped_le_values == ("oops", "")
    assert grouped.groups == (
        slo.BucketGroup((("job", "a"),), (Bucket(0.1, 1.0), Bucket(INF, 2.0))),
    )


def test_two_names_with_the_same_labels_collide() -> None:
    samples = [
        ({"__name__": "a_bucket", "le": "+Inf"}, 1.0),
        ({"__name__": "b_bucket", "le": "+Inf"}, 1.0),
    ]
    with pytest.raises(slo.DuplicateLabelSetError, match="share the output labels"):
        slo.group_bucket_samples(samples)


STEPS = [(1, 1), (2, 3), (3, 6), (INF, 100)]


@pytest.mark.parametrize(
    ("lower", "upper", "buckets", "expected"),
    [
        (0, 1.5, STEPS, 0.02),
        (-4, -2, [(-3, 10), (-2, 12), (-1, 15), (INF, 100)], 0.02),
        (-INF, -1.5, [(-3, 10), (-2, 12), (-1, 15), (INF, 100)], 0.135),
        (-INF, INF, STEPS, 1.0),
        (4, 5, STEPS, 0.0),
        (2, 5, STEPS, 0.03),
        (400, INF, STEPS, 0.94),
        (2, 2, STEPS, 0.0),
        (3, 2, STEPS, 0.0),
        (0, 1, [(INF, 100)], 0.0),
        (0, 5, [(1, 0), (2, 0), (INF, 0)], NAN),
        (0.5, 2, STEPS, 0.025),
        (1, 3, STEPS, 0.05),
        (0.1, 0.75, [(0.5, 2.5), (1, 7.5), (INF, 100)], 0.045),
        (-1, 1, [(-2, 5), (-1, 10), (0, 15), (1, 20), (INF, 100)], 0.1),
        (NAN, 1, STEPS, NAN),
        (0, NAN, STEPS, NAN),
        (0, 1, [(1, 1), (2, 3)], NAN),
    ],
)
def test_histogram_fraction(lower, upper, buckets, expected) -> None:
    assert same(histogram_fraction(lower, upper, buckets), expected)
