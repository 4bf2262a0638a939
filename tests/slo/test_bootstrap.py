"""The two-level percentile bootstrap of a difference (``slo.bootstrap``): seeded, bounded,
a real shift found, identical samples within noise, run-to-run spread widening the interval,
and clear errors for bad inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slo import SLOError, Statistic, bootstrap_difference, bootstrap_differences
from slo.bootstrap import MAX_RESAMPLES


def _lognormal(seed: int, n: int, scale: float = 1.0) -> list[float]:
    return list(np.random.default_rng(seed).lognormal(3.0, 0.4, n) * scale)


def test_a_real_shift_exceeds_the_noise_and_the_estimate_is_the_pooled_difference():
    a, b = _lognormal(1, 400), _lognormal(2, 400, scale=1.3)
    result = bootstrap_difference([a], [b], Statistic(0.95), num_resamples=300)
    assert result.estimate == pytest.approx(np.quantile(b, 0.95) - np.quantile(a, 0.95))
    assert result.low <= result.estimate <= result.high
    assert result.excludes_zero and result.low > 0
    assert not result.has_repeats  # one repeat a side: sampling noise only
    assert result.statistic == "p95"


def test_two_samples_of_one_distribution_are_within_noise():
    a, b = _lognormal(3, 400), _lognormal(4, 400)
    result = bootstrap_difference([a], [b], Statistic(), num_resamples=300)
    assert result.low < 0 < result.high and not result.excludes_zero
    assert result.statistic == "mean"


def test_the_same_seed_gives_the_same_interval_and_another_seed_another():
    a, b = _lognormal(5, 200), _lognormal(6, 200)
    one = bootstrap_difference([a], [b], num_resamples=200, seed=7)
    assert one == bootstrap_difference([a], [b], num_resamples=200, seed=7)
    assert one != bootstrap_difference([a], [b], num_resamples=200, seed=8)


def test_run_to_run_spread_widens_the_interval():
    """Each repeat shifted by its own offset: pooled within-run noise alone would call the
    5% shift real; resampling the repeats sees their spread and calls it noise."""
    offsets_a, offsets_b = (0.8, 1.0, 1.2), (0.85, 1.05, 1.25)
    a = [_lognormal(10 + i, 300, scale=s) for i, s in enumerate(offsets_a)]
    b = [_lognormal(20 + i, 300, scale=s) for i, s in enumerate(offsets_b)]
    across = bootstrap_difference(a, b, Statistic(0.5), num_resamples=300)
    pooled = bootstrap_difference(
        [np.concatenate(a)], [np.concatenate(b)], Statistic(0.5), num_resamples=300
    )
    assert across.has_repeats and not across.excludes_zero
    assert (across.high - across.low) > 2 * (pooled.high - pooled.low)


def test_empty_repeats_are_ignored_but_an_empty_side_is_an_error():
    result = bootstrap_difference([[1.0, 2.0], []], [[3.0, 4.0]], num_resamples=10)
    assert result.num_repeats_a == 1
    with pytest.raises(SLOError, match="a: every repeat is empty"):
        bootstrap_difference([[]], [[1.0]])
    with pytest.raises(SLOError, match="b: expected one or more repeats"):
        bootstrap_difference([[1.0]], [])


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"num_resamples": 5}, "num_resamples=5"),
        ({"num_resamples": MAX_RESAMPLES + 1}, "num_resamples="),
        ({"num_resamples": 2.5}, "whole number"),
        ({"confidence": 1.0}, r"confidence=1\.0"),
        ({"confidence": 0}, "confidence=0"),
    ],
)
def test_bad_parameters_are_named(kwargs, says):
    with pytest.raises(SLOError, match=says):
        bootstrap_difference([[1.0, 2.0]], [[1.0, 3.0]], **kwargs)


def test_bad_values_and_quantiles_are_named():
    with pytest.raises(SLOError, match=r"a\[0\]: holds a NaN"):
        bootstrap_difference([[1.0, math.nan]], [[1.0]])
    with pytest.raises(SLOError, match=r"b\[0\]: expected a list of numbers"):
        bootstrap_difference([[1.0]], [["x"]])
    with pytest.raises(SLOError, match=r"quantile=1\.5"):
        Statistic(1.5)


values = st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=40)


@settings(max_examples=40, deadline=None)
@given(
    a=st.lists(values, min_size=1, max_size=3),
    b=st.lists(values, min_size=1, max_size=3),
    q=st.one_of(st.none(), st.floats(0.0, 1.0)),
    confidence=st.floats(0.01, 0.99),
)
def test_the_interval_is_ordered_and_inside_the_resampled_range(a, b, q, confidence):
    result = bootstrap_difference(a, b, Statistic(q), num_resamples=20, confidence=confidence)
    assert result.low <= result.high
    span = max(map(max, a + b)) - min(map(min, a + b))
    assert -span - 1e-6 <= result.low and result.high <= span + 1e-6
    assert math.isfinite(result.estimate)


def test_several_statistics_share_one_set_of_resamples():
    a, b = _lognormal(30, 300), _lognormal(31, 300, scale=1.2)
    stats = (Statistic(0.5), Statistic(0.95), Statistic())
    several = bootstrap_differences([a], [b], stats, num_resamples=200, seed=4)
    assert [i.statistic for i in several] == ["p50", "p95", "mean"]
    for interval, stat in zip(several, stats, strict=True):
        assert interval.estimate == pytest.approx(stat.of(np.asarray(b)) - stat.of(np.asarray(a)))
    # the first statistic alone draws the same resamples: the same interval
    assert several[0] == bootstrap_difference([a], [b], stats[0], num_resamples=200, seed=4)


def test_thinning_bounds_the_values_drawn_and_widens_the_interval():
    a, b = _lognormal(40, 5000), _lognormal(41, 5000, scale=1.05)
    full = bootstrap_difference([a], [b], Statistic(0.95), num_resamples=200)
    (thin,) = bootstrap_differences([a], [b], [Statistic(0.95)], num_resamples=200,
                                    max_values=500)  # fmt: skip
    assert (thin.high - thin.low) > (full.high - full.low)
    with pytest.raises(SLOError, match="max_values=5"):
        bootstrap_differences([a], [b], [Statistic()], max_values=5)
    with pytest.raises(SLOError, match="statistics: expected at least one"):
        bootstrap_differences([a], [b], [])
