"""The benchmark helpers that make figures hold on any machine: a queue that outlasts the
window, a knee search that reports "none found" instead of crashing on empty runs."""

from __future__ import annotations

import pytest

from bench._driver import RequestRecord, RunResult
from bench._knee import attainment, describe_knee, goodput_knee
from bench._report import Slo
from bench._saturation import SAFETY_FACTOR, decode_tokens_per_second_bound, queued_at_zero
from bench._workload import CHAT_WORKLOAD

SLO = Slo(ttft_seconds=1.0, tpot_seconds=0.05)


def _result(records: tuple[RequestRecord, ...], elapsed: float = 10.0) -> RunResult:
    tokens = sum(r.num_output_tokens for r in records)
    return RunResult(records, 0.0, elapsed, tokens, num_steps=1, mean_batch_size=1.0)


def test_queued_at_zero_offers_more_tokens_than_the_bound_can_consume():
    for bound, window in ((100.0, 1.0), (5000.0, 6.0), (50000.0, 10.0)):
        workload = queued_at_zero(CHAT_WORKLOAD, bound, window)
        assert all(r.arrival_seconds == 0.0 for r in workload)
        assert sum(r.max_tokens for r in workload) >= SAFETY_FACTOR * bound * window
        assert len({r.request_id for r in workload}) == len(workload)


def test_a_decode_bound_that_cannot_be_timed_is_an_error_not_an_empty_workload():
    # 20 blocks of 16 hold two or three of the 32 requests at once: never a full batch
    with pytest.raises(RuntimeError, match="no step ran 32 requests all decoding"):
        decode_tokens_per_second_bound(32, max_model_len=64, num_gpu_blocks=20, block_size=16)


def test_an_empty_run_has_zero_attainment_and_the_knee_says_none_was_found():
    assert attainment(_result(()), SLO) == 0.0
    knee = goodput_knee(lambda rate: _result(()), SLO, start_rate=4.0, max_probes=3)
    assert knee.knee_rate is None and len(knee.rows) == 3
    assert describe_knee(knee) == "< 1 (no probed rate met it)"


def test_a_run_that_took_no_time_has_zero_rates_not_a_division_by_zero():
    from bench._report import goodput_per_second

    empty = _result((), elapsed=0.0)
    assert empty.output_tokens_per_second == 0.0 == goodput_per_second(empty, SLO)
    knee = goodput_knee(lambda rate: empty, SLO, start_rate=4.0, max_probes=2)
    assert knee.knee_rate is None
    assert all(r["request_goodput"] == 0.0 == r["output_token_throughput"] for r in knee.rows)


def test_the_knee_is_the_highest_rate_meeting_the_slo():
    def run_at(rate: float) -> RunResult:
        # a stand-in engine: every request is good up to 6 req/s, none above
        ttft = 0.1 if rate <= 6.0 else 5.0
        records = tuple(RequestRecord(0.0, 10, ttft, ttft + 1.0, 21) for _ in range(20))
        return _result(records)

    knee = goodput_knee(run_at, SLO, start_rate=2.0, max_probes=8)
    assert knee.knee_rate is not None and 5.0 <= knee.knee_rate <= 6.0
    assert knee.first_failing_rate is not None and 6.0 < knee.first_failing_rate <= 8.0
    assert describe_knee(knee) == f"{knee.knee_rate:.3g}"
