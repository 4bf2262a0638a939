"""The "what changed?" drills on the virtual fleet (docs/alerts.md, "What changed?"): both
orders of a change and an incident. A config push that lowers max_num_seqs under steady
traffic pages queue-growth, and triage ranks the change first, at page time and over the
incident, ahead of every cause; an unrelated knob (prefix caching off) changed seconds before
an overload ranks below the overload, shown beside the recommendation as a recent change.
Deterministic: one virtual run of each for the session."""

from __future__ import annotations

import pytest

from alerts import AlertName, Cause
from alerts.triage import render_text
from tests.loadgen.drill_runs import drill_report, virtual_drill


def _page(name: str):
    drill = virtual_drill(name)
    return next(p for p in drill.pages if p.alert.name == AlertName.QUEUE_GROWTH)


def test_a_change_that_is_the_cause_ranks_first() -> None:
    report = drill_report("capacity-knob")
    assert report.fired is not None and report.fired.name == AlertName.QUEUE_GROWTH
    assert report.drill.verdict()["moved"]
    top = report.triage.hypotheses[0]
    assert report.cause_rank() == (1, top.score) and top.score > 0.9
    assert top.change.describe() == "max_num_seqs 16 → 1 changed on replica-0, -1 at 00:00:40 UTC"
    causes = [h for h in report.triage.hypotheses if h.change is None]
    assert max(h.score for h in causes) < 0.3  # no cause explains queueing at steady arrivals
    text = render_text(report.triage, width=200)
    assert "Recommendation (change): revert the change: max_num_seqs 16 → 1 changed on" in text


def test_at_page_time_the_change_is_already_first() -> None:
    page = _page("capacity-knob")
    assert page.triage.verdict == Cause.CHANGE
    assert page.triage.hypotheses[0].change.subjects == ("max_num_seqs",)


@pytest.mark.parametrize("when", ["page", "incident"])
def test_an_unrelated_knob_just_before_an_overload_ranks_below_it(when) -> None:
    report = drill_report("knob-before-overload")
    triage = _page("knob-before-overload").triage if when == "page" else report.triage
    assert triage.verdict == Cause.OVERLOAD
    (knob,) = [
        h for h in triage.hypotheses if h.change and "enable_prefix_caching" in h.change.subjects
    ]
    assert knob.reasons[0].sub_score == 1.0  # it lines up with the onset
    assert knob.score < triage.hypotheses[0].score and knob.score < 0.3
    recent = [h.change.subjects for h in triage.recommendation.recent_changes]
    assert ("enable_prefix_caching",) in recent


def test_the_detector_recorded_both_knob_changes_with_their_values() -> None:
    from collectors.changes import describe_change

    drill = virtual_drill("capacity-knob")
    assert drill.report.fired is not None
    found = [(e.target, describe_change(e)) for e in drill.changes if e.subject == "max_num_seqs"]
    assert found == [
        ("replica-0", "max_num_seqs 16 → 1"),
        ("replica-1", "max_num_seqs 16 → 1"),
        ("replica-0", "max_num_seqs 1 → 16"),
        ("replica-1", "max_num_seqs 1 → 16"),
    ]
