"""Triage's busy-but-idle GPU and speculation-not-paying causes on hand-built inputs: each
names its own incident, and neither takes an incident whose signals say another cause."""

from __future__ import annotations

import pytest

from alerts import Cause
from alerts.triage import WindowPair, evidence_table, rows_by_key, triage
from alerts.triage.evidence import EvidenceKey
from tests.alerts import triage_cases as tc

K = EvidenceKey


def _scores(data) -> dict[Cause, float]:
    return {h.cause: h.score for h in triage(data).hypotheses}


def _hypothesis(data, cause: Cause):
    return next(h for h in triage(data).hypotheses if h.cause is cause)


def _values(m) -> dict[str, float]:
    return {k: v.value for k, v in vars(m).items() if v.is_known}


def test_the_acceptance_row_is_accepted_over_draft_tokens_and_changes_by_difference():
    row = rows_by_key(evidence_table(tc.spec_not_paying()))[K.SPEC_ACCEPTANCE]
    assert row.incident == pytest.approx(128 / 9000)
    assert row.baseline == pytest.approx(1780 / 4000)
    assert row.change == pytest.approx(128 / 9000 - 1780 / 4000)


def test_sglang_s_acceptance_gauge_stands_in_for_the_counters():
    base = tc.measurements(itl_mean_seconds=0.0107, spec_accept_rate_mean=0.6)
    inc = tc.measurements(itl_mean_seconds=0.03, spec_accept_rate_mean=0.1)
    row = rows_by_key(evidence_table(tc.single(inc, base)))[K.SPEC_ACCEPTANCE]
    assert (row.incident, row.baseline) == (0.1, 0.6)
    assert triage(tc.single(inc, base)).verdict == Cause.SPEC_NOT_PAYING.value


def test_the_token_gap_per_running_request_is_the_itl_mean_over_the_batch():
    row = rows_by_key(evidence_table(tc.busy_idle_gpu()))[K.ITL_PER_RUNNING]
    assert row.change == pytest.approx((0.0186 / 5.0) / (0.0066 / 3.9))


def test_busy_idle_scores_from_its_ramps():
    h = _hypothesis(tc.busy_idle_gpu(), Cause.BUSY_IDLE_GPU)
    by_key = {r.key: r for r in h.reasons}
    assert by_key[K.ITL_MEAN].sub_score == 1.0  # 2.8x: over the ramp's 2
    assert by_key[K.GPU_UTILIZATION].sub_score == 1.0  # 0.99: over the ramp's 0.95
    assert h.score == pytest.approx(1.0)
    data = tc.busy_idle_gpu()
    half_busy = tc.single(
        tc.measurements(**{**_values(data.fleet.incident), "gpu_utilization_mean": 0.875}),
        data.fleet.baseline,
    )
    # halfway up the utilisation ramp (0.8..0.95): 0.7 + 0.3 x 0.5
    assert _hypothesis(half_busy, Cause.BUSY_IDLE_GPU).score == pytest.approx(0.85)


def test_without_nvml_the_gpu_s_utilisation_counts_as_low_not_as_missing():
    data = tc.busy_idle_gpu()
    inc = tc.measurements(**{
        k: getattr(data.fleet.incident, k).value
        for k in ("itl_mean_seconds", "running_mean", "prompt_tokens_mean", "itl_p99_seconds")
    })  # fmt: skip
    base = tc.measurements(itl_mean_seconds=0.0066, running_mean=3.9, prompt_tokens_mean=64.0)
    h = _hypothesis(tc.single(inc, base), Cause.BUSY_IDLE_GPU)
    assert h.has_enough_data and h.score == pytest.approx(0.7)
    assert triage(tc.single(inc, base)).verdict == Cause.BUSY_IDLE_GPU.value


def test_a_batch_that_grew_with_its_steps_is_load_not_an_idle_gpu():
    # Little's law: the same arrivals held twice as long are a batch twice as large
    base = tc.measurements(itl_mean_seconds=0.010, running_mean=8.0)
    inc = tc.measurements(itl_mean_seconds=0.020, running_mean=16.0)
    assert _scores(tc.single(inc, base))[Cause.BUSY_IDLE_GPU] == 0.0


def test_a_batch_that_grew_but_left_requests_queueing_did_not_absorb_the_slower_steps():
    # Little's law grew the batch as much as the steps slowed, yet the queue's share of
    # TTFT rose from 0.04 to 0.9: the cap held the rest back
    base = tc.measurements(itl_mean_seconds=0.010, running_mean=4.0, prompt_tokens_mean=64.0)
    inc = tc.measurements(itl_mean_seconds=0.020, running_mean=8.0, queue_mean_seconds=0.45,
                          ttft_mean_seconds=0.5, prompt_tokens_mean=64.0)  # fmt: skip
    h = _hypothesis(tc.single(inc, base), Cause.BUSY_IDLE_GPU)
    assert h.score == pytest.approx(0.7)  # no NVML: 0.7
    # the same with the drafts' acceptance fallen from 0.45 to 0.05: speculation's
    spec = {"spec_draft_tokens": 1000.0}
    inc = tc.measurements(**{**_values(inc), **spec, "spec_accepted_tokens": 50.0})
    base = tc.measurements(**{**_values(base), **spec, "spec_accepted_tokens": 450.0})
    assert _scores(tc.single(inc, base))[Cause.BUSY_IDLE_GPU] == 0.0


def test_more_arrivals_longer_prompts_or_preemptions_discount_the_idle_gpu():
    base = tc.measurements(itl_mean_seconds=0.010, running_mean=8.0, prompt_tokens_mean=64.0)
    slower = {"itl_mean_seconds": 0.025, "running_mean": 8.0, "prompt_tokens_mean": 64.0}
    assert _scores(tc.single(tc.measurements(**slower), base))[Cause.BUSY_IDLE_GPU] > 0.6
    for other in (
        {"arrival_rate_per_second": 8.0},  # twice the healthy 4 req/s: overload's
        {"prompt_tokens_mean": 320.0},  # five times the prompts: prefill interference's
        {"num_preemptions": 8.0},  # one in ten requests preempted: the KV pool's
    ):
        inc = tc.measurements(**{**slower, **other})
        assert _scores(tc.single(inc, base))[Cause.BUSY_IDLE_GPU] == 0.0, other


def test_one_slow_replica_is_a_skew_not_an_idle_fleet():
    fast = tc.measurements(itl_mean_seconds=0.010, running_mean=4.0, e2e_mean_seconds=0.5)
    slow = tc.measurements(itl_mean_seconds=0.030, running_mean=4.0, e2e_mean_seconds=1.5)
    data = tc.fleet_of(
        {
            "r0": WindowPair(fast, fast),
            "r1": WindowPair(fast, fast),
            "r2": WindowPair(slow, fast),
        }
    )
    scores = _scores(data)
    assert scores[Cause.BUSY_IDLE_GPU] == 0.0
    assert triage(data).verdict == Cause.SLOW_REPLICA.value


def test_spec_not_paying_needs_the_acceptance_to_fall_and_latency_to_grow():
    h = _hypothesis(tc.spec_not_paying(), Cause.SPEC_NOT_PAYING)
    assert h.score == pytest.approx(1.0)
    assert _scores(tc.spec_not_paying())[Cause.BUSY_IDLE_GPU] == 0.0  # the batch grew more
    base = tc.spec_not_paying().fleet.baseline
    # the acceptance rate held (0.445 both sides): a speculating fleet that got slower for
    # another reason
    held = tc.measurements(
        itl_mean_seconds=0.0339, running_mean=68.0, spec_draft_tokens=9000.0,
        spec_accepted_tokens=9000 * 0.445, itl_p99_seconds=0.14,
    )  # fmt: skip
    assert _scores(tc.single(held, base))[Cause.SPEC_NOT_PAYING] == 0.0
    # the acceptance fell but nothing got slower: no incident of it
    quiet = tc.measurements(
        itl_mean_seconds=0.0107, running_mean=10.5, spec_draft_tokens=4000.0,
        spec_accepted_tokens=400.0, itl_p99_seconds=0.070,
    )  # fmt: skip
    assert _scores(tc.single(quiet, base))[Cause.SPEC_NOT_PAYING] == 0.0


def test_a_memory_bound_fleet_shows_lost_speculation_in_its_first_tokens():
    # steps keep their time (ITL mean and p99 flat), the fleet serves fewer requests a second
    base = tc.measurements(itl_mean_seconds=0.0107, spec_draft_tokens=4000.0,
                           spec_accepted_tokens=1780.0, ttft_p95_seconds=0.08)  # fmt: skip
    inc = tc.measurements(itl_mean_seconds=0.0108, spec_draft_tokens=9000.0,
                          spec_accepted_tokens=900.0, ttft_p95_seconds=0.2)  # fmt: skip
    h = _hypothesis(tc.single(inc, base), Cause.SPEC_NOT_PAYING)
    assert h.score == pytest.approx(1.0)  # 0.445 -> 0.1, TTFT p95 2.5x


def test_requests_that_need_more_steps_take_longer_whatever_the_load():
    # a generated H100 run's figures: ITL, its tail, the queue and TTFT p95 flat; e2e 2.4x
    base = tc.measurements(e2e_mean_seconds=0.9, spec_draft_tokens=4000.0,
                           spec_accepted_tokens=1780.0)  # fmt: skip
    inc = tc.measurements(e2e_mean_seconds=2.2, spec_draft_tokens=9000.0,
                          spec_accepted_tokens=750.0)  # fmt: skip
    h = _hypothesis(tc.single(inc, base), Cause.SPEC_NOT_PAYING)
    assert h.score == pytest.approx(1.0)


def test_a_fleet_that_does_not_speculate_has_no_acceptance_rate():
    h = _hypothesis(tc.overload(), Cause.SPEC_NOT_PAYING)
    assert not h.has_enough_data and h.score == 0.0
    assert "draft acceptance rate" in h.note
