"""Goodput as vllm bench serve --goodput defines it, and histogram-only attainment."""

from __future__ import annotations

import math

import pytest

import slo
from slo import ClassicHistogram, Objectives, RequestRecord, is_good, request_goodput

INF = math.inf


def request(ttft=0.2, e2e=2.2, tokens=101, ok=True, itl=None) -> RequestRecord:
    return RequestRecord(ok, ttft, e2e, tokens, prompt_tokens=50, max_itl_seconds=itl)


def test_tpot_is_vllms_definition() -> None:
    assert request(ttft=0.2, e2e=2.2, tokens=101).tpot_seconds == pytest.approx(0.02)
    assert request(ttft=0.2, e2e=0.2, tokens=1).tpot_seconds == 0.0
    assert request(tokens=0).tpot_seconds == 0.0


@pytest.mark.parametrize(
    ("record", "objectives", "good"),
    [
        (request(), Objectives(ttft_seconds=0.2), True),  # inclusive: threshold >= measured
        (request(ttft=0.2000001), Objectives(ttft_seconds=0.2), False),
        (request(), Objectives(tpot_seconds=0.02), True),
        (request(), Objectives(tpot_seconds=0.019), False),
        (request(e2e=30.0), Objectives(ttft_seconds=1, e2e_seconds=29.9), False),
        (request(tokens=1, e2e=50.0), Objectives(tpot_seconds=0.001), True),  # TPOT 0
        (request(ok=False), Objectives(ttft_seconds=100), False),  # failures are never good
        (request(ok=False), Objectives(), False),
        (request(), Objectives(), True),
        (request(itl=0.3), Objectives(itl_seconds=0.25), False),
        (request(itl=0.25), Objectives(itl_seconds=0.25), True),
        (request(tokens=1), Objectives(itl_seconds=0.25), True),  # no gaps: like TPOT
    ],
)
def test_good_requests(record: RequestRecord, objectives: Objectives, good: bool) -> None:
    assert is_good(record, objectives) is good


def test_itl_objective_needs_the_worst_gap() -> None:
    with pytest.raises(slo.SLOError, match="max_itl_seconds"):
        is_good(request(itl=None), Objectives(itl_seconds=0.1))


def test_goodput_and_attainment() -> None:
    records = [request(ttft=0.1 * i) for i in range(1, 11)] + [request(ok=False)] * 2
    result = request_goodput(records, Objectives(ttft_seconds=0.5), duration_seconds=4.0)
    # ttft 0.1 .. 0.5 meet the objective (0.30000000000000004 included), 0.6 .. 1.0 do not
    assert (result.num_requests, result.num_succeeded, result.num_good) == (12, 10, 5)
    assert result.goodput_requests_per_second == 1.25
    assert result.throughput_requests_per_second == 2.5
    assert result.attainment == pytest.approx(5 / 12)
    assert math.isnan(request_goodput([], Objectives(), 1.0).attainment)
    with pytest.raises(slo.SLOError, match="duration_seconds"):
        request_goodput(records, Objectives(), 0.0)


TTFT_LAYOUT = (0.1, 0.25, 0.5, 1.0)


def ttft_histogram() -> ClassicHistogram:
    # 40 at or under 0.1 s, 30 in (0.1, 0.25], 20 in (0.25, 0.5], 6 in (0.5, 1], 4 above 1 s
    return ClassicHistogram((*TTFT_LAYOUT, INF), (40, 70, 90, 96, 100))


@pytest.mark.parametrize(
    ("threshold", "attainment", "lower", "upper", "is_exact"),
    [
        (0.25, 0.70, 0.70, 0.70, True),
        (0.5, 0.90, 0.90, 0.90, True),
        (0.375, 0.80, 0.70, 0.90, False),  # halfway through (0.25, 0.5]: interpolated
        (0.05, 0.20, 0.0, 0.40, False),  # lowest bucket interpolates from 0
        (5.0, 0.96, 0.96, 1.0, False),  # above the highest bound: only a lower bound is known
    ],
)
def test_objective_attainment(threshold, attainment, lower, upper, is_exact) -> None:
    estimate = slo.objective_attainment(ttft_histogram(), threshold)
    assert estimate.attainment == pytest.approx(attainment)
    assert (estimate.lower_bound, estimate.upper_bound) == pytest.approx((lower, upper))
    assert estimate.is_exact is is_exact


def test_attainment_of_an_empty_histogram_is_unknown() -> None:
    empty = ClassicHistogram((0.1, INF), (0, 0))
    assert math.isnan(slo.objective_attainment(empty, 0.1).attainment)


def test_histogram_attainment_matches_request_level_at_bucket_bounds() -> None:
    ttfts = [0.03 * i for i in range(1, 40)]
    histogram = ClassicHistogram.from_observations(ttfts, TTFT_LAYOUT)
    records = [request(ttft=t) for t in ttfts]
    for threshold in TTFT_LAYOUT:
        by_request = request_goodput(records, Objectives(ttft_seconds=threshold), 1.0)
        estimate = slo.objective_attainment(histogram, threshold)
        assert estimate.is_exact and estimate.attainment == by_request.attainment


@pytest.mark.parametrize(
    ("attainments", "lower", "upper"),
    [
        ([0.99, 0.98], 0.97, 0.98),
        ([0.9, 0.8, 0.7], 0.4, 0.7),
        ([0.3, 0.4], 0.0, 0.3),  # Σa - (n-1) < 0 → 0
        ([0.95], 0.95, 0.95),
        ([], 1.0, 1.0),
    ],
)
def test_joint_attainment_bounds(attainments, lower, upper) -> None:
    bounds = slo.joint_attainment_bounds(attainments)
    assert (bounds.lower_bound, bounds.upper_bound) == pytest.approx((lower, upper))


def test_joint_bounds_use_each_estimates_interval() -> None:
    ttft = slo.objective_attainment(ttft_histogram(), 0.375)  # [0.70, 0.90]
    e2e = slo.AttainmentEstimate(0.95, 0.95, 0.95, True)
    bounds = slo.joint_attainment_bounds([ttft, e2e])
    assert (bounds.lower_bound, bounds.upper_bound) == pytest.approx((0.65, 0.90))


def test_joint_bounds_contain_the_true_joint_attainment() -> None:
    records = [request(ttft=0.05 * (i % 13), e2e=0.5 * (i % 7) + 1, tokens=2) for i in range(91)]
    objectives = Objectives(ttft_seconds=0.25, e2e_seconds=2.0)
    ttft = ClassicHistogram.from_observations([r.ttft_seconds for r in records], TTFT_LAYOUT)
    e2e = ClassicHistogram.from_observations([r.e2e_seconds for r in records], (1.0, 2.0, 5.0))
    joint = request_goodput(records, objectives, 1.0).attainment
    bounds = slo.joint_attainment_bounds(
        [slo.objective_attainment(ttft, 0.25), slo.objective_attainment(e2e, 2.0)]
    )
    assert bounds.lower_bound <= joint <= bounds.upper_bound


def test_attainments_outside_unit_interval_are_refused() -> None:
    with pytest.raises(slo.SLOError, match=r"\[0, 1\]"):
        slo.joint_attainment_bounds([1.2])
