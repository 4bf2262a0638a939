"""Incidents, rule failures and notifier memory behind ``AlertStateStore``: the same answers
from ``MemoryAlertState`` and the SQL store on SQLite and PostgreSQL."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace

import pytest

from alerts import MAX_INCIDENT_ID, Alert, AlertState, EvaluationError, Notified, Transition
from tests.collectors.alert_state_cases import IMPLEMENTATIONS, Fresh, fresh_states


@pytest.fixture(params=IMPLEMENTATIONS)
def fresh(request: pytest.FixtureRequest, tmp_path) -> Iterator[Fresh]:
    yield from fresh_states(request, tmp_path)


def _moved(alert: Alert, at: float, before: AlertState) -> Transition:
    return Transition(at, alert.fingerprint, before, alert.state, alert)


def _episode(state, name: str, pending: float, fired: float, **labels: str) -> Alert:
    """Save an alert going pending at ``pending`` and firing at ``fired``; the firing alert."""
    alert = Alert.pending({"alertname": name, **labels}, pending, {"summary": f"{name} hot"})
    state.save_evaluation([alert], [_moved(alert, pending, AlertState.INACTIVE)])
    firing = alert.fire(fired, value=2.0)
    state.save_evaluation([firing], [_moved(firing, fired, AlertState.PENDING)])
    return firing


def test_an_incident_opens_when_an_alert_fires_and_closes_when_it_resolves(fresh: Fresh) -> None:
    state = fresh()
    pending = Alert.pending({"alertname": "KV", "severity": "page"}, 100.0)
    state.save_evaluation([pending], [_moved(pending, 100.0, AlertState.INACTIVE)])
    assert state.incidents() == []  # pending is not an incident
    firing = _episode(state, "KV", 100.0, 160.0, severity="page")
    (incident,) = state.incidents()
    assert (incident.id, incident.state, incident.is_open) == (1, "firing", True)
    assert (incident.alertname, incident.severity, incident.summary) == ("KV", "page", "KV hot")
    assert (incident.pending_since_seconds, incident.started_at_seconds) == (100.0, 160.0)
    assert incident.resolved_at_seconds is None and incident.value == 2.0
    # each later evaluation brings the alert's latest value and annotations
    state.save_evaluation([replace(firing, value=7.5)], [])
    assert state.incident(1).value == 7.5  # type: ignore[union-attr]
    resolved = firing.resolve(400.0, value=0.1)
    state.save_evaluation([], [_moved(resolved, 400.0, AlertState.FIRING)])
    closed = state.incident(1)
    assert closed is not None and closed.state == "resolved" and not closed.is_open
    assert (closed.resolved_at_seconds, closed.value) == (400.0, 0.1)
    # the same alert firing again is a new incident; the first keeps its id and record
    again = _episode(state, "KV", 500.0, 520.0, severity="page")
    assert [i.id for i in state.incidents()] == [2, 1]
    assert state.incident(2).started_at_seconds == 520.0  # type: ignore[union-attr]
    assert state.incident(1) == closed
    # a resolved incident does not reopen when a stale firing version is saved again
    state.save_evaluation([again, firing], [])
    assert state.incident(1) == closed


def test_incidents_list_open_first_then_resolved_newest_first(fresh: Fresh) -> None:
    state = fresh()
    a = _episode(state, "A", 0.0, 10.0)
    b = _episode(state, "B", 0.0, 20.0)
    c = _episode(state, "C", 0.0, 30.0)
    state.save_evaluation(
        [b],
        [_moved(a.resolve(100.0), 100.0, AlertState.FIRING), _moved(c.resolve(50.0), 50.0, AlertState.FIRING)],
    )  # fmt: skip
    assert [(i.alertname, i.state) for i in state.incidents()] == [
        ("B", "firing"),
        ("C", "resolved"),
        ("A", "resolved"),
    ]
    assert [i.alertname for i in state.incidents(since_seconds=60.0)] == ["B", "A"]
    assert [i.alertname for i in state.incidents(since_seconds=math.inf)] == ["B"]
    assert [i.alertname for i in state.incidents(since_seconds=math.nan)] == ["B"]
    assert [i.alertname for i in state.incidents(limit=2)] == ["B", "C"]
    with pytest.raises(ValueError, match="limit=0"):
        state.incidents(limit=0)


@pytest.mark.parametrize("incident_id", [0, -1, 99, MAX_INCIDENT_ID, 2**70, True, "1", 1.0])
def test_an_id_no_incident_has_is_a_plain_miss(fresh: Fresh, incident_id) -> None:
    state = fresh()
    _episode(state, "A", 0.0, 10.0)
    assert state.incident(incident_id) is None
    assert state.incident(1) is not None


def test_rule_failures_keep_the_latest_error_and_a_count(fresh: Fresh) -> None:
    state = fresh()
    assert state.evaluation_health().last_evaluation_seconds is None
    for at in (10.0, 25.0):
        error = EvaluationError("tail-latency-ttft", at, "LayoutChangeError", f"changed at {at}")
        state.save_evaluation([], [], [error], at)
    state.save_evaluation([], [], [EvaluationError("queue", 40.0, "ValueError", "x")], 40.0)
    health = state.evaluation_health()
    assert health.last_evaluation_seconds == 40.0
    kept = [
        (f.rule, f.num_failures, f.first_failed_seconds, f.last_failed_seconds, f.message)
        for f in health.failures
    ]
    assert kept == [
        ("queue", 1, 40.0, 40.0, "x"),
        ("tail-latency-ttft", 2, 10.0, 25.0, "changed at 25.0"),
    ]
    assert [f.rule for f in health.failing] == ["queue"]  # the other works again
    state.save_evaluation([], [], [], 55.0)
    assert state.evaluation_health().failing == ()


def test_a_bad_evaluation_time_is_refused_and_nothing_written(fresh: Fresh) -> None:
    state = fresh()
    alert = Alert.pending({"alertname": "A"}, 1.0)
    with pytest.raises(ValueError, match="finite"):
        state.save_evaluation([alert], [], [], math.nan)
    assert state.active_alerts() == [] and state.evaluation_health().last_evaluation_seconds is None


def test_notifier_memory_is_replaced_per_notifier(fresh: Fresh) -> None:
    state = fresh()
    firing = Alert.pending({"alertname": "A"}, 1.0).fire(2.0)
    other = Alert.pending({"alertname": "B"}, 1.0).fire(2.0).resolve(5.0)
    had = Notified("hook 1", firing.fingerprint, AlertState.FIRING, 2.0, firing)
    retry = Notified("hook 1", other.fingerprint, AlertState.RESOLVED, 5.0, other)
    am = Notified("am", firing.fingerprint, AlertState.FIRING, 3.0, firing)
    state.save_notified("hook 1", [had, retry])
    state.save_notified("am", [am])
    assert sorted(state.notified(), key=lambda r: (r.notifier, r.fingerprint)) == sorted(
        [had, retry, am], key=lambda r: (r.notifier, r.fingerprint)
    )
    state.save_notified("hook 1", [])
    assert state.notified() == [am]
    for bad, message in (
        (Notified("am", firing.fingerprint, AlertState.FIRING, 3.0, firing), "saved as"),
        (Notified("hook 1", "0" * 16, AlertState.FIRING, 3.0, firing), "fingerprint"),
        (Notified("hook 1", firing.fingerprint, AlertState.PENDING, 3.0, firing), "state"),
        (Notified("hook 1", firing.fingerprint, AlertState.FIRING, math.inf, firing), "finite"),
    ):
        with pytest.raises(ValueError, match=message):
            state.save_notified("hook 1", [bad])
    with pytest.raises(ValueError, match="notifier="):
        state.save_notified("a\x00b", [])
    assert state.notified() == [am]
