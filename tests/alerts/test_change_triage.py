"""Changes as hypotheses: "changed X at T" ranks first when it lines up with the onset and
moves what the incident shows, below the real cause when it does not (an unrelated knob just
before an overload); timing, direction, scope and the two classes (what someone did, what
happened to the fleet) each decide; scores stay in [0, 1], order-free, and never raise."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alerts import ACTIONS, Cause
from alerts.triage import (
    NO_CAUSE,
    SCORE_FLOOR,
    TriageInput,
    WindowPair,
    footprint,
    render_text,
    triage,
)
from alerts.triage.change_hypotheses import FOOTPRINTS, direction, onset_span
from collectors.store.change_records import ChangeEvent, ChangeKind
from tests.alerts import triage_cases as tc

INFO = "vllm:cache_config_info"


def capacity_squeeze(*changes: ChangeEvent) -> TriageInput:
    """Steady traffic on one replica, and then requests queue: capacity fell."""
    inc = tc.measurements(
        ttft_mean_seconds=0.9, queue_mean_seconds=0.8, ttft_p95_seconds=1.6, waiting_mean=9.0
    )
    return tc.single(inc, changes=changes)


def lowered(target: str = "r0", lead: float = 30.0) -> ChangeEvent:
    return tc.change(target, "max_num_seqs", "32", "4", lead_seconds=lead)


def test_a_knob_that_lines_up_and_explains_the_incident_ranks_first() -> None:
    assert triage(capacity_squeeze()).verdict == NO_CAUSE  # arrivals did not rise
    report = triage(capacity_squeeze(lowered()))
    top, runner_up = report.hypotheses[:2]
    assert (top.cause, top.scope, report.verdict) == (Cause.CHANGE, "r0", "change")
    assert top.score == pytest.approx(1.0) and runner_up.score < SCORE_FLOOR
    rec = report.recommendation
    assert rec.action == ACTIONS[Cause.CHANGE][0] and rec.change == top.change
    assert rec.change.describe() == "max_num_seqs 32 → 4 changed on r0 at 08:09:30 UTC"
    text = render_text(report, width=160)
    assert "Triage verdict: change (max_num_seqs 32 → 4 changed on r0 at 08:09:30 UTC)" in text
    assert "Recommendation (change): revert the change: max_num_seqs 32 → 4 changed on r0" in text


def test_an_unrelated_knob_just_before_an_overload_ranks_below_the_overload() -> None:
    data = replace(tc.overload(), changes=(lowered(lead=5.0),))
    report = triage(data)
    assert report.verdict == Cause.OVERLOAD
    (change,) = [h for h in report.hypotheses if h.cause is Cause.CHANGE]
    assert change.score == 0.0  # the arrivals' twelvefold rise explains the queue by itself
    assert [r.what for r in change.reasons][-2:] == [
        "steady: arrivals",
        "steady: prompt length p95 (tokens)",
    ]
    assert "08:09:55 UTC (score 0.00)" in render_text(report, width=200)


@pytest.mark.parametrize(
    ("lead_spans", "timing"),
    [(0.0, 1.0), (1.0, 1.0), (2.0, 1.0), (3.0, 0.5), (3.9, 0.05)],
)
def test_timing_is_full_up_to_two_onset_spans_before_the_start_then_falls(lead_spans, timing):
    data = capacity_squeeze()
    span = onset_span(data.incident, data.baseline)
    (change,) = [
        h
        for h in triage(replace(data, changes=(lowered(lead=lead_spans * span),))).hypotheses
        if h.change is not None
    ]
    assert change.reasons[0].sub_score == pytest.approx(timing)
    assert change.score == pytest.approx(timing)


@pytest.mark.parametrize("lead_spans", [-0.1, 4.0, 10.0])
def test_a_change_after_the_start_or_long_before_is_no_hypothesis(lead_spans) -> None:
    data = capacity_squeeze()
    span = onset_span(data.incident, data.baseline)
    report = triage(replace(data, changes=(lowered(lead=lead_spans * span),)))
    assert all(h.change is None for h in report.hypotheses)
    assert report.verdict == NO_CAUSE


def test_which_way_a_knob_moved_decides_what_it_explains() -> None:
    raised = tc.change("r0", "max_num_seqs", "4", "32")
    assert direction(raised) == 1 and direction(lowered()) == -1
    assert triage(capacity_squeeze(raised)).verdict == NO_CAUSE  # more seats queue nobody
    # raised, it explains preemptions instead (the KV pool holds fewer of each sequence)
    kv = replace(tc.kv_pressure(), changes=(raised,))
    top = triage(kv).hypotheses[0]
    assert (top.cause, top.change.subjects) == (Cause.CHANGE, ("max_num_seqs",))


def test_a_deploy_of_another_quantisation_explains_a_slower_token_gap() -> None:
    slower = tc.measurements(itl_p99_seconds=0.16, e2e_mean_seconds=1.1)
    deploy = tc.change("r0", "quantization", "none", "int8", kind=ChangeKind.CONFIG, source=INFO)
    report = triage(tc.single(slower, changes=(deploy,)))
    top = report.hypotheses[0]
    assert (report.verdict, top.change.what) == (
        "change",
        ("quantization (vllm:cache_config_info) none → int8",),
    )
    assert top.score == pytest.approx(1.0)
    # the same slower gap with longer prompts is the prompts' doing, not the deploy's
    longer = replace(slower, prompt_tokens_p95=tc.Measure(480.0, tc.Source.HISTOGRAM))
    assert triage(tc.single(longer, changes=(deploy,))).verdict == Cause.PREFILL_INTERFERENCE


def test_a_replica_removed_explains_the_queue_the_others_build() -> None:
    queued = tc.measurements(ttft_mean_seconds=0.9, queue_mean_seconds=0.8, waiting_mean=9.0)
    replicas = {
        "r0": WindowPair(queued, tc.measurements()),
        "r1": WindowPair(queued, tc.measurements()),
    }
    removed = tc.change("r2", "removed", kind=ChangeKind.TARGET, source="scrapes")
    report = triage(tc.fleet_of(replicas, changes=(removed,)))
    assert report.verdict == "change"
    assert report.hypotheses[0].change.describe() == "r2 removed at 08:09:30 UTC"


def test_a_restart_explains_only_its_own_replica() -> None:
    """In the scale-out case r2 and r3 serve cold; the hit-rate skew singles out r2."""
    data = tc.scale_out_round_robin()

    def restart_of(target: str):
        event = tc.change(target, "restarted", "a", "b", kind=ChangeKind.TARGET, source="id")
        (found,) = [h for h in triage(replace(data, changes=(event,))).hypotheses if h.change]
        return found

    cold, warm = restart_of("r2"), restart_of("r0")
    assert cold.score > 0.5 and cold.reasons[1].scope == "r2"
    assert warm.score == 0.0 and "(another replica)" in warm.reasons[1].what


def test_a_traffic_shift_ranks_after_the_cause_it_drives() -> None:
    shift = tc.change("", "batch", "0.000", "0.200", kind=ChangeKind.TRAFFIC, source="tenant")
    report = triage(replace(tc.long_prompt_surge(), changes=(shift,)))
    assert report.verdict == Cause.PREFILL_INTERFERENCE
    (change,) = [h for h in report.hypotheses if h.change is not None]
    assert change.score < report.hypotheses[0].score
    assert "a circumstance" in change.note
    assert "consider reverting" not in render_text(report, width=200)
    # when no cause explains it, the traffic's own footprint can: arrivals twice as many,
    # served without queueing
    more = tc.single(tc.measurements(arrival_rate_per_second=8.0, e2e_mean_seconds=1.6))
    assert triage(replace(more, changes=(shift,))).verdict == "change"
    # outputs three times longer at the same arrivals: output-length-shift names them, and the
    # traffic change that made them ranks after it (a circumstance)
    longer = tc.single(tc.measurements(output_tokens_mean=150.0, e2e_mean_seconds=1.6))
    report = triage(replace(longer, changes=(shift,)))
    assert report.verdict == Cause.OUTPUT_LENGTH_SHIFT
    assert any(h.change is not None for h in report.hypotheses[1:])


def test_every_footprint_is_guarded_by_steady_traffic_but_the_traffics() -> None:
    for subject in FOOTPRINTS:
        event = ChangeEvent(1.0, "r0", ChangeKind.KNOB, str(subject), "1", "2")
        for alternative in footprint(event):
            assert [s.inverse for s in alternative].count(True) == 2, subject
    traffic = ChangeEvent(1.0, "", ChangeKind.TRAFFIC, "t", "0.1", "0.5", "tenant")
    assert all(not any(s.inverse for s in a) for a in footprint(traffic))


_subjects = st.sampled_from(
    [*map(str, FOOTPRINTS), "quantization", "model", "lora", "added", "removed", "restarted", "x"]
)
_values = st.one_of(
    st.just(""), st.sampled_from(["true", "false", "None", "nan", "inf"]),
    st.floats(allow_nan=True).map(repr), st.text(max_size=5),
)  # fmt: skip
_events = st.builds(
    lambda target, kind, subject, before, after, lead: ChangeEvent(
        tc.INCIDENT.start_seconds - lead, target, kind, subject, before, after, "s"
    ),
    st.sampled_from(["r0", "r1", "r2", ""]),
    st.sampled_from(list(ChangeKind)),
    _subjects,
    _values,
    _values,
    st.floats(-400, 400),
)
_cases = st.sampled_from([make for make, _ in tc.SCENARIOS.values()] + [tc.clean, capacity_squeeze])


@settings(max_examples=60, deadline=None)
@given(_cases, st.lists(_events, max_size=8), st.randoms(use_true_random=False))
def test_any_changes_keep_scores_bounded_ranked_and_order_free(make, events, rnd) -> None:
    data = replace(make(), changes=tuple(events))
    report = triage(data)
    scores = [h.score for h in report.hypotheses]
    assert all(0.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True)
    for h in report.hypotheses:
        if h.change is not None:
            assert h.reasons[0].sub_score > 0 and not math.isnan(h.score)
    shuffled = list(events)
    rnd.shuffle(shuffled)
    assert repr(triage(replace(data, changes=tuple(shuffled)))) == repr(report)
