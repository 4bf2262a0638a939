"""The adapter-thrash and cold-start causes on hand-built inputs: their rows, their scores
from the ramps' ends, and that neither takes another cause's incident."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from alerts import Cause
from alerts.triage import TriageInput, WindowPair, triage
from alerts.triage.evidence import EvidenceKey, evidence_table, rows_by_key
from alerts.triage.hypotheses import rank_hypotheses
from collectors.store.change_records import ChangeKind
from tests.alerts import triage_cases as tc

K = EvidenceKey
BEFORE_BASELINE = tc.BASELINE.start_seconds - 3600.0
JUST_STARTED = tc.INCIDENT.start_seconds - 30.0


def _score(data: TriageInput, cause: Cause) -> float:
    (found,) = [h for h in rank_hypotheses(evidence_table(data)) if h.cause is cause]
    return found.score


def _adapters(loads: float, load_seconds: float, ttft: float = 0.2) -> TriageInput:
    """One replica serving 80 requests over each window; the baseline loaded nothing."""
    base = tc.measurements(lora_loads=0.0, lora_load_seconds=0.0)
    inc = tc.measurements(lora_loads=loads, lora_load_seconds=load_seconds, ttft_mean_seconds=ttft)
    return tc.single(inc, base)


def test_adapters_that_reload_for_a_quarter_of_requests_are_thrash() -> None:
    # 20 loads of 0.2 s over 80 requests whose first tokens took 16 s in all: a quarter
    data = _adapters(loads=20.0, load_seconds=4.0)
    rows = rows_by_key(evidence_table(data))
    assert rows[K.LORA_LOADS_PER_REQUEST].change == pytest.approx(0.25)
    assert rows[K.LORA_LOAD_SHARE].incident == pytest.approx(0.25)
    report = triage(data)
    assert report.verdict == Cause.ADAPTER_THRASH
    assert report.recommendation.action.knob == "max_cpu_loras"


def test_the_thrash_score_is_the_product_of_its_two_ramps() -> None:
    # 4 loads in 80 requests (0.05: 3/8 up 0.02..0.1), 1.6 s of 16 (0.1: 1/4 up 0.05..0.25)
    assert _score(_adapters(4.0, 1.6), Cause.ADAPTER_THRASH) == pytest.approx(0.375 * 0.25)


def test_loads_behind_a_queue_count_by_the_replicas_time_they_take() -> None:
    # 75 s of loads in the 300 s window (a quarter of the replica's time): the queue they
    # build makes TTFT 10 s, so the loads are under a tenth of the first tokens' time
    data = _adapters(loads=30.0, load_seconds=75.0, ttft=10.0)
    rows = rows_by_key(evidence_table(data))
    assert rows[K.LORA_LOAD_TIME_SHARE].incident == pytest.approx(0.25)
    assert rows[K.LORA_LOAD_SHARE].incident < 0.1
    assert triage(data).verdict == Cause.ADAPTER_THRASH


def test_a_popular_adapter_loaded_once_is_no_thrash() -> None:
    assert _score(_adapters(loads=1.0, load_seconds=0.2), Cause.ADAPTER_THRASH) == 0.0


def test_loads_that_cost_no_first_token_time_are_no_thrash() -> None:
    # many loads, but instant (a local cache): nothing of TTFT goes to them
    assert _score(_adapters(loads=40.0, load_seconds=0.0), Cause.ADAPTER_THRASH) == 0.0


def test_without_lora_the_cause_says_not_enough_data_and_triage_goes_on() -> None:
    report = triage(tc.overload())
    (thrash,) = [h for h in report.hypotheses if h.cause is Cause.ADAPTER_THRASH]
    assert not thrash.has_enough_data and "adapter loads" in thrash.note
    assert report.verdict == Cause.OVERLOAD


def _fleet(cold_itl: float, cold_ttft: float = 0.05, *, hits: float = 1600.0) -> TriageInput:
    """r0, r1 running since before the baseline; r2, r3 started 30 s before the incident
    (no baseline requests), their token gaps ``cold_itl`` s against the steady 20 ms."""
    steady = tc.measurements(itl_mean_seconds=0.02, start_time_seconds=BEFORE_BASELINE)
    new_base = tc.measurements(num_requests=0.0, prefix_queries=0.0, prefix_hits=0.0)
    new_inc = tc.measurements(
        itl_mean_seconds=cold_itl,
        ttft_mean_seconds=cold_ttft,
        e2e_mean_seconds=0.5 * cold_itl / 0.02,
        start_time_seconds=JUST_STARTED,
        prefix_hits=hits,
    )
    new_base = replace(new_base, start_time_seconds=tc.Measure())
    return tc.fleet_of(
        {
            "r0": WindowPair(steady, steady),
            "r1": WindowPair(steady, steady),
            "r2": WindowPair(new_inc, new_base),
            "r3": WindowPair(new_inc, new_base),
        }
    )


def test_replicas_stepping_slowly_after_they_started_are_a_cold_start() -> None:
    data = _fleet(cold_itl=0.05)
    rows = rows_by_key(evidence_table(data))
    assert rows[K.COLD_ITL_RATIO].incident == pytest.approx(2.5)
    assert rows[K.COLD_ITL_RATIO].scope == "r2,r3"
    report = triage(data)
    assert report.verdict == Cause.COLD_START
    assert report.recommendation.action.knob == "warm_up_seconds"
    (slow,) = [h for h in report.hypotheses if h.cause is Cause.SLOW_REPLICA]
    assert slow.score < report.hypotheses[0].score and "started since" in slow.note


def test_the_cold_ramp_runs_from_a_quarter_to_twice_as_slow() -> None:
    assert _score(_fleet(cold_itl=0.025), Cause.COLD_START) == 0.0
    assert _score(_fleet(cold_itl=0.0325), Cause.COLD_START) == pytest.approx(0.5)


def test_slow_first_tokens_count_only_while_the_prefix_hit_rate_held() -> None:
    # TTFT 4x the steady replicas' (0.2 s over 0.05), token gaps unmoved
    assert _score(_fleet(cold_itl=0.02, cold_ttft=0.2), Cause.COLD_START) == 1.0
    # the same on cold prefix caches (the fleet's hit rate down 0.2): prefix scatter's
    scattered = _fleet(cold_itl=0.02, cold_ttft=0.2, hits=800.0)
    assert _score(scattered, Cause.COLD_START) == 0.0


def test_no_replica_started_means_not_enough_data_for_a_cold_start() -> None:
    (cold,) = [h for h in triage(tc.slow_replica()).hypotheses if h.cause is Cause.COLD_START]
    assert not cold.has_enough_data
    assert math.isnan(rows_by_key(evidence_table(tc.slow_replica()))[K.COLD_ITL_RATIO].incident)


@pytest.mark.parametrize("subject", ["added", "restarted"])
def test_the_scale_out_that_brought_the_cold_replicas_agrees_and_ranks_after(subject) -> None:
    events = tuple(
        tc.change(t, subject, "", "up", kind=ChangeKind.TARGET, source="scrapes")
        for t in ("r2", "r3")
    )
    report = triage(replace(_fleet(cold_itl=0.05), changes=events))
    assert report.verdict == Cause.COLD_START
    (change,) = [h for h in report.hypotheses if h.change is not None]
    assert "a circumstance" in change.note and change.score < report.hypotheses[0].score


def test_a_scale_out_that_scatters_prefixes_is_still_prefix_scatter() -> None:
    added = tuple(
        tc.change(t, "added", "", "up", kind=ChangeKind.TARGET, source="scrapes")
        for t in ("r2", "r3")
    )
    data = replace(tc.scale_out_round_robin(), changes=added)
    report = triage(data)
    assert Cause.PREFIX_SCATTER in (report.verdict, *(h.cause for h in report.hypotheses[:2]))
    assert _score(data, Cause.COLD_START) == 0.0


def _deployed(compile_seconds: float, started: float) -> TriageInput:
    """One replica, restarted at ``started`` (a deploy), its 80 requests' first tokens 16 s
    in all, ``compile_seconds`` of them compiling structured-output grammars."""
    inc = tc.measurements(
        ttft_mean_seconds=0.2,
        grammar_compile_seconds=compile_seconds,
        start_time_seconds=started,
    )
    return tc.single(inc, tc.measurements(start_time_seconds=BEFORE_BASELINE))


def test_grammars_compiled_again_after_a_deploy_are_a_cold_start() -> None:
    data = _deployed(compile_seconds=4.0, started=JUST_STARTED)
    rows = rows_by_key(evidence_table(data))
    assert rows[K.COLD_COMPILE_SHARE].incident == pytest.approx(0.25)
    assert rows[K.COLD_COMPILE_SHARE].scope == "r0"
    assert triage(data).verdict == Cause.COLD_START
    # 1.2 s of 16 (0.075): an eighth of the way up 0.05..0.25
    assert _score(_deployed(1.2, JUST_STARTED), Cause.COLD_START) == pytest.approx(0.125)


def test_compiles_on_a_replica_running_since_before_the_baseline_are_no_cold_start() -> None:
    data = _deployed(compile_seconds=4.0, started=BEFORE_BASELINE)
    assert math.isnan(rows_by_key(evidence_table(data))[K.COLD_COMPILE_SHARE].incident)
    (cold,) = [h for h in triage(data).hypotheses if h.cause is Cause.COLD_START]
    assert not cold.has_enough_data
