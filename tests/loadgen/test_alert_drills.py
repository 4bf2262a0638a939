"""Each incident scenario on the virtual fleet (simulated replicas, the collector's own
parsing and store, the real evaluator and triage, one virtual clock: docs/alerts.md,
"Drills"): the scenario's alert pages while the incident lasts and not before, triage
names the scenario's cause first (at page time and over the whole incident), and the page
resolves once the fleet recovers; every clean twin of the same length pages nothing.

Deterministic: nothing sleeps and nothing races a wall clock, so a busy or a fast machine
gives the same run. One real-time drill (bundled engines over HTTP and a real
``tailwatch collect``) remains as a smoke test, with generous margins."""

from __future__ import annotations

import pytest

from alerts import SEVERITY, SEVERITY_PAGE, AlertState
from loadgen.scenario import load_scenario
from tailwatch.alert_drill import run_alert_drill
from tests.loadgen.drill_runs import drill_report, virtual_drill
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
def test_triage_at_page_time_names_the_cause_of_the_scenario_alert(name):
    """What the on-call engineer reads when paged: triage over what was stored by then."""
    drill = virtual_drill(name)
    wanted = EXPECTED[name][0]
    page = next(p for p in drill.pages if p.alert.name == wanted)
    assert page.triage is not None
    top = [(h.cause.value, round(h.score, 2)) for h in page.triage.hypotheses[:3]]
    assert page.triage.verdict == EXPECTED[name][1].value, top


@pytest.mark.parametrize("name", NAMES)
def test_the_page_resolves_once_the_fleet_recovers(name):
    report = drill_report(name)
    assert report.fired is not None
    assert report.resolved_at_seconds is not None, "still firing after the drill settled"
    assert report.resolved_at_seconds > report.fired.started_at_seconds


@pytest.mark.parametrize("name", NAMES)
def test_a_clean_twin_of_the_same_length_pages_nothing(name):
    report = drill_report(name, clean=True)
    drill = report.drill
    assert [p.duration_seconds for p in drill.scenario.phases] == [
        p.duration_seconds for p in drill_report(name).drill.scenario.phases
    ]
    pages = [
        t.alert.name
        for t in report.transitions
        if t.to_state is AlertState.FIRING and t.alert.labels.get(SEVERITY) == SEVERITY_PAGE
    ]
    assert pages == [], report.fired_names()
    # the evaluator ran on every tick of the drill
    length = sum(p.duration_seconds for p in drill.scenario.phases)
    assert report.evaluations >= length / report.timing.evaluation_interval_seconds


def test_the_virtual_drill_is_the_same_run_every_time():
    first = drill_report("slow-replica")
    again = virtual_drill_again("slow-replica")
    assert [(t.at_seconds, t.alert.name, t.to_state) for t in first.transitions] == [
        (t.at_seconds, t.alert.name, t.to_state) for t in again.transitions
    ]
    assert first.drill.verdict()["perturbation"] == again.drill.verdict()["perturbation"]


def virtual_drill_again(name: str):
    from loadgen.virtual.drill import run_virtual_drill

    return run_virtual_drill(load_scenario(name)).report


def test_a_real_time_drill_pages_through_real_engines_and_a_real_collector(tmp_path):
    """The smoke test: bundled engines over HTTP, a ``tailwatch collect`` process scraping
    them and evaluating, compressed time. KV pressure pages on preemptions, which need no
    long history, so its compressed windows hold enough evidence on any machine; the bounds
    are the incident's phases, never a wall-clock budget."""
    scenario = load_scenario("kv-pressure")
    report = run_alert_drill(scenario.scaled(scenario.compressed_time_scale), tmp_path / "kv")
    start, end = report.perturbation_start, report.drill.phase_end("perturbation")
    assert report.fired is not None, report.fired_names()
    assert report.fired.name == "kv-saturation"
    assert start <= report.fired.started_at_seconds <= end + report.timing.settle_seconds
    assert report.triage is not None and report.triage.verdict == "kv-exhaustion"


def test_drilling_an_unknown_scenario_is_one_error_line(tmp_path):
    from typer.testing import CliRunner

    from tailwatch.cli import app

    ran = CliRunner().invoke(
        app, ["scenario", "drill", "no-such-drill", "--workdir", str(tmp_path)]
    )
    assert ran.exit_code == 2
    assert ran.output.count("error:") == 1 and "no-such-drill" in ran.output
    assert not any(tmp_path.iterdir())  # nothing ran
