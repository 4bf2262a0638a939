"""Proposed latency objectives (``slo.propose_latency_objective``): the threshold is the
bucket edge at or above the window's p99, the target the highest snap value the window met
with the margin to spare; too few observations, a p99 in ``+Inf`` and a margin past the
lowest target give no proposal, with a reason. Table-driven, then fuzzed with hypothesis."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import slo
from slo import (
    PROPOSAL_TARGETS,
    ClassicHistogram,
    LatencyProposal,
    NoProposal,
    Shortfall,
    propose_latency_objective,
)
from slo.propose import CONFIDENCE_Z, wilson_lower_bound

INF = math.inf
M = 1_000_000
Z2 = CONFIDENCE_Z**2
#: vLLM's TTFT layout's first edges, enough for hand-counted cases.
EDGES = (0.01, 0.02, 0.04, 0.1, 0.25, 0.5, INF)


def _h(*cumulative: float, edges: tuple[float, ...] = EDGES) -> ClassicHistogram:
    return ClassicHistogram(edges, tuple(float(c) for c in cumulative))


# (histogram, margin, threshold_seconds, target, attainment, lower bound): hand-counted; the
# Wilson bound worked by hand to 4 places (n / (n + z^2) when every observation is good).
PROPOSED = [
    # 20,000 observations, 99.9 % at 0.1 s: bound 0.99856 - 0.005 = 0.99356 → 0.99.
    pytest.param(
        _h(0, 0, 0, 19_980, 20_000, 20_000, 20_000), 0.005, 0.1, 0.99, 0.999, 0.99856, id="0.99"
    ),
    # Without the margin the same window reaches 0.995.
    pytest.param(
        _h(0, 0, 0, 19_980, 20_000, 20_000, 20_000), 0.0, 0.1, 0.995, 0.999, 0.99856, id="margin-0"
    ),
    # 99.5 % of 1000: bound 0.98976, so 0.99 is not met even before the margin.
    pytest.param(
        _h(100, 500, 900, 995, 1000, 1000, 1000), 0.005, 0.1, 0.95, 0.995, 0.98976, id="snap"
    ),
    # 200 of 200 under the edge is consistent with a true 98.67 %: not 0.995.
    pytest.param(
        _h(0, 0, 0, 0, 200, 200, 200), 0.005, 0.25, 0.95, 1.0, 200 / (200 + Z2), id="few-all-met"
    ),
    # A million, all met: bound 0.999997; minus 0.005 → 0.99, minus 0.0005 → 0.999.
    pytest.param(_h(0, 0, 0, 0, M, M, M), 0.005, 0.25, 0.99, 1.0, M / (M + Z2), id="many-met"),
    pytest.param(_h(0, 0, 0, 0, M, M, M), 0.0005, 0.25, 0.999, 1.0, M / (M + Z2), id="0.999"),
    # Rank 99,000 exactly on an edge's count: that edge (Prometheus picks the same bucket).
    pytest.param(
        _h(0, 0, 99_000, 99_500, 100_000, 100_000, 100_000),
        0.0,
        0.04,
        0.95,
        0.99,
        0.98947,
        id="on-rank",
    ),
    # 99.5 % of a million: bound 0.99488: 0.99 with no margin, 0.95 with 0.005.
    pytest.param(_h(0, 0, 0, 995_000, M, M, M), 0.0, 0.1, 0.99, 0.995, 0.99488, id="big"),
    pytest.param(_h(0, 0, 0, 995_000, M, M, M), 0.005, 0.1, 0.95, 0.995, 0.99488, id="big-5"),
    # A large margin moves the target down the set: 0.98976 - 0.05 → 0.9.
    pytest.param(
        _h(10, 20, 40, 995, 1000, 1000, 1000), 0.05, 0.1, 0.9, 0.995, 0.98976, id="big-margin"
    ),
    # Empty low buckets: the first edge that reaches the rank, not the first non-empty one.
    pytest.param(_h(0, 0, 0, 0, 0, 999, 1000), 0.005, 0.5, 0.99, 0.999, 0.99553, id="empty-low"),
    # The p99 in the last finite bucket is still measurable there.
    pytest.param(_h(0, 0, 0, 0, 0, 996, 1000), 0.0, 0.5, 0.99, 0.996, 0.99112, id="last-finite"),
    # Non-monotonic counts (a scrape race) are raised to the running maximum first.
    pytest.param(
        _h(100, 90, 995, 994, 1000, 1000, 1000), 0.005, 0.04, 0.95, 0.995, 0.98976, id="race"
    ),
    # Fractional counts (an extrapolated window) are fine: 199.5 / 200.5 = 0.99501.
    pytest.param(
        _h(0, 0, 0, 199.5, 200.5, 200.5, 200.5),
        0.0,
        0.1,
        0.95,
        199.5 / 200.5,
        0.97795,
        id="fractional",
    ),
]


@pytest.mark.parametrize(
    ("histogram", "margin", "threshold", "target", "attainment", "lower_bound"), PROPOSED
)
def test_threshold_is_the_edge_at_or_above_p99_and_target_keeps_the_margin(
    histogram, margin, threshold, target, attainment, lower_bound
) -> None:
    proposal = propose_latency_objective(histogram, margin=margin)
    assert isinstance(proposal, LatencyProposal), proposal
    assert proposal.threshold_seconds == threshold
    assert proposal.target == target
    assert proposal.attainment == pytest.approx(attainment, rel=1e-12)
    assert proposal.attainment_lower_bound == pytest.approx(lower_bound, abs=1e-5)
    assert proposal.num_observations == histogram.total_count
    # Prometheus's own p99 estimate lies in the bucket whose upper edge is the threshold.
    assert proposal.quantile_seconds <= proposal.threshold_seconds
    assert proposal.quantile_seconds == histogram.quantile(0.99).value


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10**7), st.data())
def test_the_lower_bound_solves_wilsons_equation_below_the_fraction(total, data) -> None:
    """``(p - L)^2 = z^2 L (1 - L) / n`` with ``0 <= L <= p``: the score interval's lower end."""
    good = data.draw(st.integers(0, total))
    p, bound = good / total, wilson_lower_bound(good, total)
    assert 0 <= bound <= p
    if good:
        assert (p - bound) ** 2 == pytest.approx(Z2 * bound * (1 - bound) / total, rel=1e-6)
    assert math.isnan(wilson_lower_bound(0, 0))
    # None good: exactly 0, though the formula's two terms cancel only up to rounding.
    assert wilson_lower_bound(0, total) == 0.0


NO_PROPOSAL = [
    pytest.param(
        _h(0, 0, 0, 0, 0, 0, 0), {}, Shortfall.TOO_FEW_OBSERVATIONS, "0 observations", id="empty"
    ),
    pytest.param(
        _h(10, 50, 99, 99, 99, 99, 99),
        {},
        Shortfall.TOO_FEW_OBSERVATIONS,
        "fewer than the 100",
        id="99",
    ),
    pytest.param(
        _h(1, 2, 3, 3, 3, 3, 3),
        {"min_observations": 4},
        Shortfall.TOO_FEW_OBSERVATIONS,
        "fewer than the 4",
        id="custom-min",
    ),
    # 980 of 1000 at or below the last finite edge: the p99 is in +Inf.
    pytest.param(
        _h(100, 500, 900, 950, 970, 980, 1000),
        {},
        Shortfall.BEYOND_LAST_BUCKET,
        "le=0.5 s, which holds 98.00%",
        id="inf-bucket",
    ),
    pytest.param(
        ClassicHistogram((INF,), (500.0,)),
        {},
        Shortfall.BEYOND_LAST_BUCKET,
        "there is none",
        id="only-inf",
    ),
    # Only edges at or below zero are finite: no positive threshold exists.
    pytest.param(
        ClassicHistogram((-1.0, 0.0, INF), (0.0, 500.0, 500.0)),
        {},
        Shortfall.BEYOND_LAST_BUCKET,
        "there is none",
        id="non-positive",
    ),
    # 0.98976 - 0.1 < 0.9.
    pytest.param(
        _h(0, 0, 0, 995, 1000, 1000, 1000),
        {"margin": 0.1},
        Shortfall.BELOW_LOWEST_TARGET,
        "(at least 0.9898 at 95 % confidence) minus margin 0.1 is below the lowest target 0.9",
        id="margin",
    ),
]


@pytest.mark.parametrize(("histogram", "kwargs", "shortfall", "words"), NO_PROPOSAL)
def test_no_proposal_says_why(histogram, kwargs, shortfall, words) -> None:
    result = propose_latency_objective(histogram, **kwargs)
    assert isinstance(result, NoProposal), result
    assert result.shortfall is shortfall
    assert words in result.reason, result.reason
    assert result.num_observations == histogram.total_count


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"margin": math.nan}, "margin"),
        ({"margin": -0.01}, "margin"),
        ({"margin": 1.0}, "margin"),
        ({"margin": math.inf}, "margin"),
        ({"margin": True}, "margin"),
        ({"quantile": 1.0}, "quantile"),
        ({"quantile": 0.0}, "quantile"),
        ({"quantile": math.nan}, "quantile"),
        ({"min_observations": 0}, "min_observations"),
        ({"min_observations": math.inf}, "min_observations"),
        ({"targets": ()}, "targets"),
        ({"targets": (0.99, 1.0)}, "targets"),
    ],
)
def test_bad_arguments_are_an_slo_error_naming_them(kwargs, words) -> None:
    with pytest.raises(slo.SLOError, match=words):
        propose_latency_objective(_h(0, 0, 0, 995, 1000, 1000, 1000), **kwargs)


# -- fuzzing: random bucket counts, layouts and margins ---------------------------------------

layouts = st.lists(st.floats(1e-4, 1e4), min_size=1, max_size=10, unique=True).map(
    lambda bounds: (*sorted(bounds), INF)
)
margins = st.one_of(st.sampled_from([0.0, 0.0005, 0.005, 0.01, 0.05, 0.09]), st.floats(0, 0.999999))


@st.composite
def histograms(draw) -> ClassicHistogram:
    """Cumulative counts of whole observations, as a stored window's are (differences of
    counters). Fractional counts that differ by float noise are flattened before counting,
    as Prometheus does; the table above has a fractional case."""
    edges = draw(layouts)
    per_bucket = draw(
        st.lists(
            st.integers(0, 5000),
            min_size=len(edges),
            max_size=len(edges),
        )
    )
    cumulative, running = [], 0.0
    for count in per_bucket:
        running += count
        cumulative.append(running)
    return ClassicHistogram(edges, tuple(cumulative))


@settings(max_examples=300, deadline=None)
@given(histograms(), margins)
def test_a_proposal_is_an_edge_a_snap_target_and_met_by_the_window(histogram, margin) -> None:
    result = propose_latency_objective(histogram, margin=margin)
    total = histogram.total_count
    if isinstance(result, NoProposal):
        if total < 100:
            assert result.shortfall is Shortfall.TOO_FEW_OBSERVATIONS
        return
    assert total >= 100
    # The threshold is a finite bucket edge, at or above the window's p99.
    assert result.threshold_seconds in histogram.upper_bounds
    assert math.isfinite(result.threshold_seconds) and result.threshold_seconds > 0
    assert histogram.quantile(0.99).value <= result.threshold_seconds
    # The target is one of the snap values, in (0, 1).
    assert result.target in PROPOSAL_TARGETS and 0 < result.target < 1
    # Attainment recomputed from the buckets (counted at the edge) meets the target; its
    # lower bound does too, with the margin to spare (compared as the decimals they print as).
    index = histogram.upper_bounds.index(result.threshold_seconds)
    recomputed = histogram.cumulative_counts[index] / total
    assert recomputed == result.attainment
    assert recomputed >= result.attainment_lower_bound
    assert recomputed >= result.target
    spare = Fraction(repr(margin))
    bound = Fraction(result.attainment_lower_bound)
    assert bound >= Fraction(repr(result.target)) + spare
    # The highest such target: the next one up would not have been met.
    higher = [t for t in PROPOSAL_TARGETS if t > result.target]
    if higher:
        assert Fraction(repr(min(higher))) + spare > bound
    # The smallest edge whose count reaches the rank: the edge below it does not.
    if index > 0 and histogram.upper_bounds[index - 1] > 0:
        assert histogram.cumulative_counts[index - 1] < 0.99 * total


@settings(max_examples=200, deadline=None)
@given(histograms())
def test_the_p99_in_the_inf_bucket_is_never_proposed(histogram) -> None:
    result = propose_latency_objective(histogram)
    finite_max = histogram.cumulative_counts[-2] if len(histogram.upper_bounds) > 1 else 0.0
    if histogram.total_count >= 100 and finite_max < 0.99 * histogram.total_count:
        assert isinstance(result, NoProposal)
        assert result.shortfall is Shortfall.BEYOND_LAST_BUCKET
