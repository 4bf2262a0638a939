"""Triage's output causes on inputs built by hand: structured outputs cut at max_tokens, and
answers that got longer at the same arrivals, each told apart from the causes it resembles;
and the measurements they read, from a store through the MetricsReader protocol."""

from __future__ import annotations

import math

import pytest

import tests.alerts.triage_cases as tc
from alerts import ACTIONS, Cause
from alerts.triage import TimeWindow, triage
from alerts.triage.evidence import EvidenceKey
from alerts.triage.measure_scope import Scope, measure_scope
from alerts.vocabulary import Direction
from tests.alerts.eval_data import START, Conditions, build


def _score(report, cause: Cause) -> float:
    return next(h.score for h in report.hypotheses if h.cause is cause)


def test_a_rise_of_the_structured_length_share_is_structured_truncation():
    # 1 in 20 structured answers cut before, 8 in 20 now; nothing else moved
    report = triage(tc.single(tc.measurements(structured_length=8.0)))
    assert report.verdict == Cause.STRUCTURED_TRUNCATION
    assert _score(report, Cause.STRUCTURED_TRUNCATION) == 1.0
    (row,) = [r for r in report.evidence if r.key is EvidenceKey.STRUCTURED_LENGTH_SHARE]
    assert (row.baseline, row.incident) == (0.05, 0.4)
    action = report.recommendation.action
    assert action == ACTIONS[Cause.STRUCTURED_TRUNCATION][0]
    assert action.knob == "max_tokens" and action.direction is Direction.RAISE


def test_a_steady_share_however_high_and_a_small_rise_are_not_truncation():
    steady = tc.measurements(structured_length=8.0)
    report = triage(tc.single(steady, steady))
    assert _score(report, Cause.STRUCTURED_TRUNCATION) == 0.0
    # 2 points more (2 to 4 in 100): a steady route's noise, the ramp's start
    many = tc.measurements(structured_finished=100.0, structured_length=2.0)
    small = triage(
        tc.single(tc.measurements(structured_finished=100.0, structured_length=4.0), many)
    )
    assert _score(small, Cause.STRUCTURED_TRUNCATION) == pytest.approx(0.0)
    # 5 points more, where truncation-rise fires: above the recommendation floor
    fired = triage(
        tc.single(tc.measurements(structured_finished=100.0, structured_length=7.0), many)
    )
    assert _score(fired, Cause.STRUCTURED_TRUNCATION) == pytest.approx(0.375)
    assert fired.verdict == Cause.STRUCTURED_TRUNCATION


def test_without_structured_requests_truncation_has_not_enough_data():
    none = tc.measurements(structured_finished=0.0, structured_length=0.0)
    report = triage(tc.single(none, none))
    (h,) = [h for h in report.hypotheses if h.cause is Cause.STRUCTURED_TRUNCATION]
    assert h.score == 0.0 and not h.has_enough_data


LONGER = {"output_tokens_mean": 120.0, "running_mean": 5.0, "e2e_mean_seconds": 1.4}


def test_longer_answers_at_the_same_arrivals_are_an_output_length_shift():
    report = triage(tc.single(tc.measurements(**LONGER, queue_mean_seconds=0.03)))
    assert report.verdict == Cause.OUTPUT_LENGTH_SHIFT
    assert _score(report, Cause.OUTPUT_LENGTH_SHIFT) == 1.0
    assert report.recommendation.action == ACTIONS[Cause.OUTPUT_LENGTH_SHIFT][0]
    # without the concurrency it holds up, the shift still leads, at 0.7
    flat = triage(tc.single(tc.measurements(**{**LONGER, "running_mean": 2.0})))
    assert flat.verdict == Cause.OUTPUT_LENGTH_SHIFT
    assert _score(flat, Cause.OUTPUT_LENGTH_SHIFT) == pytest.approx(0.7)


@pytest.mark.parametrize(
    ("more", "cause"),
    [
        # arrivals doubled and queueing: overload, whatever the outputs did
        ({"arrival_rate_per_second": 8.0, "queue_mean_seconds": 0.04}, Cause.OVERLOAD),
        # the longer answers no longer fit the KV pool: it preempts
        ({"num_preemptions": 16.0, "kv_usage_max": 0.99}, Cause.KV_EXHAUSTION),
        # prompts four times longer stall the decodes: prefill interference
        ({"prompt_tokens_p95": 128.0, "itl_p99_seconds": 0.2}, Cause.PREFILL_INTERFERENCE),
    ],
)
def test_longer_answers_with_another_causes_sign_rank_that_cause_first(more, cause):
    report = triage(tc.single(tc.measurements(**LONGER, **more)))
    assert report.verdict == cause
    assert _score(report, Cause.OUTPUT_LENGTH_SHIFT) < report.hypotheses[0].score


def test_the_measurements_are_read_from_the_store():
    perturb = START + 3900.0

    def behaviour(t: float, replica: int) -> Conditions:
        return Conditions(structured_length_share=0.25) if t > perturb else Conditions()

    reader = build(behaviour, hours=(perturb + 600 - START) / 3600)
    window = TimeWindow(perturb, perturb + 300)
    fleet = measure_scope(reader, Scope(None, ()), window)
    assert fleet.structured_length.value / fleet.structured_finished.value == 0.25
    assert fleet.running_mean.value == 4.0 * 3  # eval_data's three replicas, 4 running each
    one = measure_scope(reader, Scope({"target": "r1"}, ()), window)
    assert one.structured_finished.value * 3 == fleet.structured_finished.value
    before = measure_scope(reader, Scope(None, ()), TimeWindow(perturb - 300, perturb))
    assert before.structured_length.value == 0.0 and math.isfinite(before.running_mean.value)


def test_a_model_change_that_lines_up_agrees_with_the_output_length_shift():
    """A model label changed just before answers got longer: the change (an action) ranks
    first, the shift it drove second; an unrelated knob that lines up explains nothing."""
    from dataclasses import replace

    from collectors.store.change_records import ChangeKind

    data = tc.single(tc.measurements(**LONGER, queue_mean_seconds=0.03))
    model = tc.change("r0", "model", "m-v1", "m-v2", kind=ChangeKind.CONFIG, source="info")
    report = triage(replace(data, changes=(model,)))
    assert report.verdict == "change" and report.hypotheses[0].score == pytest.approx(1.0)
    assert report.hypotheses[1].cause is Cause.OUTPUT_LENGTH_SHIFT
    knob = tc.change("r0", "enable_prefix_caching", "True", "False")
    other = triage(replace(data, changes=(knob,)))
    assert other.verdict == Cause.OUTPUT_LENGTH_SHIFT
