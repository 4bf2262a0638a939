"""Each incident scenario, compressed, against bundled replicas with a real collector and
its in-collector evaluator attached (docs/alerts.md, "Drills"): the scenario's alert pages
while the incident lasts and not before, triage names the scenario's cause first, and the
page resolves once the fleet recovers; a clean twin of the same length pages nothing.

Bounds are the incident's own phases, not wall-clock budgets: on a busy machine the
evaluator's ticks come late, so the page may come later inside the perturbation, never
outside it."""

from __future__ import annotations

import pytest

from alerts.model import AlertState
from tests.loadgen.drill_runs import drill_report
from tests.loadgen.test_scenarios import EXPECTED

NAMES = sorted(EXPECTED)


@pytest.mark.parametrize("name", NAMES)
def test_the_scenario_pages_during_the_incident_and_never_before(name):
    report = drill_report(name)
    start, end = report.perturbation_start, report.drill.phase_end("perturbation")
    early = [
        (t.alert.name, t.at_seconds - start)
        for t in report.transitions
        if t.to_state is AlertState.FIRING and t.at_seconds < start
    ]
    assert not early, f"paged before the perturbation: {early}"
    assert report.fired is not None, report.fired_names()
    assert report.fired.name == EXPECTED[name][0]
    assert start <= report.fired.started_at_seconds <= end, report.detection_delay_seconds


@pytest.mark.parametrize("name", NAMES)
def test_triage_names_the_scenario_cause_first(name):
    report = drill_report(name)
    assert report.triage is not None
    rank, score = report.cause_rank()
    top = [(h.cause.value, round(h.score, 2)) for h in report.triage.hypotheses[:3]]
    assert rank == 1 and score > 0.5, top
    assert report.triage.verdict == EXPECTED[name][1].value


@pytest.mark.parametrize("name", NAMES)
def test_the_page_resolves_once_the_fleet_recovers(name):
    report = drill_report(name)
    assert report.fired is not None
    assert report.resolved_at_seconds is not None, "still firing after the drill settled"
    assert report.resolved_at_seconds > report.fired.started_at_seconds


@pytest.mark.parametrize("name", ["scale-out-round-robin"])
def test_a_clean_twin_of_the_same_length_pages_nothing(name):
    report = drill_report(name, clean=True)
    drill = report.drill
    assert [p.duration_seconds for p in drill.scenario.phases] == [
        p.duration_seconds for p in drill_report(name).drill.scenario.phases
    ]
    assert report.fired_names() == []
    # the evaluator ran the whole time (at a quarter of its ticks at least, on a busy machine)
    length = sum(p.duration_seconds for p in drill.scenario.phases)
    assert report.evaluations >= length / report.timing.evaluation_interval_seconds / 4


def test_drilling_an_unknown_scenario_is_one_error_line(tmp_path):
    from typer.testing import CliRunner

    from tailwatch.cli import app

    ran = CliRunner().invoke(
        app, ["scenario", "drill", "no-such-drill", "--workdir", str(tmp_path)]
    )
    assert ran.exit_code == 2
    assert ran.output.count("error:") == 1 and "no-such-drill" in ran.output
    assert not any(tmp_path.iterdir())  # nothing ran
