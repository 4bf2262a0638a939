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

INF = math.inf
#: vLLM's TTFT layout's first edges, enough for hand-counted cases.
EDGES = (0.01, 0.02, 0.04, 0.1, 0.25, 0.5, INF)


def _h(*cumulative: float, edges: tuple[float, ...] = EDGES) -> ClassicHistogram:
    return ClassicHistogram(edges, tuple(float(c) for c in cumulative))


# (histogram, margin, threshold_seconds, target, attainment): every one hand-counted.
PROPOSED = [
    # 1000 observations, rank 990 reached at 0.1 (995): attainment 0.995 - 0.005 = 0.99.
    pytest.param(_h(100, 500, 900, 995, 1000, 1000, 1000), 0.005, 0.1, 0.99, 0.995, id="exact"),
    # 0.994 - 0.005 = 0.989: 0.99 is not met, 0.95 is.
    pytest.param(_h(100, 500, 900, 994, 1000, 1000, 1000), 0.005, 0.1, 0.95, 0.994, id="snap"),
    # Rank 990 exactly on an edge's count: that edge (Prometheus picks the same bucket).
    pytest.param(_h(100, 500, 990, 995, 1000, 1000, 1000), 0.0, 0.04, 0.99, 0.99, id="on-rank"),
    # Margin 0: the target may equal the attainment (burn rate 1, which never fires).
    pytest.param(_h(0, 0, 0, 990, 1000, 1000, 1000), 0.0, 0.1, 0.99, 0.99, id="margin-0"),
    # Every observation at or below the edge: 1 - 0.005 = 0.995.
    pytest.param(_h(0, 0, 0, 0, 200, 200, 200), 0.005, 0.25, 0.995, 1.0, id="all-met"),
    # Margin 0.0005 lets 1.0 reach 0.999.
    pytest.param(_h(0, 0, 0, 0, 200, 200, 200), 0.0005, 0.25, 0.999, 1.0, id="small-margin"),
    # A large margin moves the target down the set: 0.995 - 0.05 = 0.945 → 0.9.
    pytest.param(_h(10, 20, 40, 995, 1000, 1000, 1000), 0.05, 0.1, 0.9, 0.995, id="big-margin"),
    # Empty low buckets: the first edge that reaches the rank, not the first non-empty one.
    pytest.param(_h(0, 0, 0, 0, 0, 999, 1000), 0.005, 0.5, 0.99, 0.999, id="empty-low"),
    # The p99 in the last finite bucket is still measurable there.
    pytest.param(_h(0, 0, 0, 0, 0, 996, 1000), 0.005, 0.5, 0.99, 0.996, id="last-finite"),
    # Non-monotonic counts (a scrape race) are raised to the running maximum first.
    pytest.param(_h(100, 90, 995, 994, 1000, 1000, 1000), 0.005, 0.04, 0.99, 0.995, id="race"),
    # Fractional counts (an extrapolated window) are fine: 199.5 / 200.5 = 0.99501.
    pytest.param(
        _h(0, 0, 0, 199.5, 200.5, 200.5, 200.5), 0.0, 0.1, 0.995, 199.5 / 200.5, id="fractional"
    ),
]


@pytest.mark.parametrize(("histogram", "margin", "threshold", "target", "attainment"), PROPOSED)
def test_threshold_is_the_edge_at_or_above_p99_and_target_keeps_the_margin(
    histogram, margin, threshold, target, attainment
) -> None:
    proposal = propose_latency_objective(histogram, margin=margin)
    assert isinstance(proposal, LatencyProposal), proposal
    assert proposal.threshold_seconds == threshold
    assert proposal.target == target
    assert proposal.attainment == pytest.approx(attainment, rel=1e-12)
    assert proposal.num_observations == histogram.total_count
    # Prometheus's own p99 estimate lies in the bucket whose upper edge is the threshold.
    assert proposal.quantile_seconds <= proposal.threshold_seconds
    assert proposal.quantile_seconds == histogram.quantile(0.99).value


def test_decimal_margins_and_targets_are_compared_as_written() -> None:
    """0.995 - 0.005 is 0.99 as decimals, but 0.98999999999999999 as binary floats: the
    proposal must be 0.99, not one step down."""
    histogram = _h(0, 0, 0, 199, 200, 200, 200)  # attainment 199/200 = 0.995 exactly
    proposal = propose_latency_objective(histogram, margin=0.005)
    assert isinstance(proposal, LatencyProposal) and proposal.target == 0.99


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
    # 0.995 - 0.1 = 0.895 < 0.9.
    pytest.param(
        _h(0, 0, 0, 995, 1000, 1000, 1000),
        {"margin": 0.1},
        Shortfall.BELOW_LOWEST_TARGET,
        "below the lowest target 0.9",
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
    # Attainment recomputed from the buckets (counted at the edge) meets the target, and
    # with the margin to spare, compared as the decimals they print as.
    index = histogram.upper_bounds.index(result.threshold_seconds)
    recomputed = histogram.cumulative_counts[index] / total
    assert recomputed == result.attainment
    assert recomputed >= result.target
    spare = Fraction(repr(margin))
    assert Fraction(histogram.cumulative_counts[index]) / Fraction(total) >= (
        Fraction(repr(result.target)) + spare
    )
    # The highest such target: the next one up would not have been met.
    higher = [t for t in PROPOSAL_TARGETS if t > result.target]
    if higher:
        assert Fraction(repr(min(higher))) + spare > Fraction(
            histogram.cumulative_counts[index]
        ) / Fraction(total)
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
