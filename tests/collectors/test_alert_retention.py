"""The maintenance pass expires the evaluator's history past the alert retention (30 days by
default): transitions, resolved incidents, rule failures, notifier records and silences
expired that long; never the active alerts, open incidents or recently expired silences; in
bounded batches; counted in the report. On SQLite and PostgreSQL."""

from __future__ import annotations

import math

from alerts import Alert, AlertState, EvaluationError, Notified, Silence, Transition
from alerts.sql import alert_state_of
from collectors.store import RetentionPolicy, Store
from collectors.store.retention import DEFAULT_ALERT_RETENTION_SECONDS

DAY = 86400.0
NOW = 1_800_000_000.0


def _moved(alert: Alert, at: float, before: AlertState) -> Transition:
    return Transition(at, alert.fingerprint, before, alert.state, alert)


def _seed(store: Store) -> Alert:
    """An old episode (resolved 40 days ago), a recent one (resolved 1 day ago), and an alert
    firing for 60 days (its incident is open, however old); failures and notifier records
    old and new; silences that expired 40 days and 1 day ago. Returns the long-firing alert."""
    state = alert_state_of(store)
    old = Alert.pending({"alertname": "Old"}, NOW - 41 * DAY).fire(NOW - 41 * DAY)
    recent = Alert.pending({"alertname": "Recent"}, NOW - 2 * DAY).fire(NOW - 2 * DAY)
    long = Alert.pending({"alertname": "Long"}, NOW - 60 * DAY).fire(NOW - 60 * DAY)
    state.save_evaluation(
        [old, long],
        [_moved(old, NOW - 41 * DAY, AlertState.PENDING), _moved(long, NOW - 60 * DAY, AlertState.PENDING)],
        [EvaluationError("broken-long-ago", NOW - 40 * DAY, "ValueError", "x")],
        NOW - 40 * DAY,
    )  # fmt: skip
    state.save_evaluation(
        [long, recent],
        [
            _moved(old.resolve(NOW - 40 * DAY), NOW - 40 * DAY, AlertState.FIRING),
            _moved(recent, NOW - 2 * DAY, AlertState.PENDING),
        ],
    )
    state.save_evaluation(
        [long],
        [_moved(recent.resolve(NOW - DAY), NOW - DAY, AlertState.FIRING)],
        [EvaluationError("broken-now", NOW - 60, "ValueError", "y")],
        NOW - 60,
    )
    state.save_notified(
        "hook",
        [
            Notified("hook", long.fingerprint, AlertState.FIRING, NOW - 60, long),
            Notified("hook", old.fingerprint, AlertState.FIRING, NOW - 41 * DAY, old),
        ],
    )
    state.save_silence(Silence("s", 'alertname="Old"', NOW - 41 * DAY, NOW - 40 * DAY, "me", "c"))
    state.save_silence(Silence("t", 'alertname="Recent"', NOW - 3 * DAY, NOW - DAY, "me", "c"))
    return long


def test_the_default_keeps_30_days() -> None:
    assert RetentionPolicy().alert_retention_seconds == DEFAULT_ALERT_RETENTION_SECONDS == 30 * DAY


def test_alert_records_past_the_retention_are_deleted_and_live_ones_kept(store: Store) -> None:
    long = _seed(store)
    state = alert_state_of(store)
    report = store.maintain(NOW)
    assert (
        report.alert_transitions_deleted,
        report.incidents_deleted,
        report.rule_failures_deleted,
        report.notified_deleted,
        report.silences_deleted,
        report.more_to_do,
    ) == (3, 1, 1, 1, 1, False)
    assert [t.alert.name for t in state.history(-math.inf, math.inf)] == ["Recent", "Recent"]
    assert [(i.alertname, i.state) for i in state.incidents()] == [
        ("Long", "firing"),  # open: kept though it started 60 days ago
        ("Recent", "resolved"),
    ]
    assert [f.rule for f in state.evaluation_health().failures] == ["broken-now"]
    assert [r.fingerprint for r in state.notified()] == [long.fingerprint]
    assert state.active_alerts() == [long]
    assert [s.id for s in state.silences()] == ["t"]  # expired a day ago: kept
    assert store.maintain(NOW).incidents_deleted == 0  # idempotent
    # ids are never reused, even once the newest incidents are gone
    state.save_evaluation([], [_moved(long.resolve(NOW), NOW, AlertState.FIRING)])
    store.maintain(NOW + 31 * DAY)
    assert state.incidents() == []
    new = Alert.pending({"alertname": "New"}, NOW + 31 * DAY).fire(NOW + 31 * DAY)
    state.save_evaluation([new], [_moved(new, NOW + 31 * DAY, AlertState.PENDING)])
    assert [i.id for i in state.incidents()] == [4]


def test_a_batch_limit_leaves_the_rest_for_the_next_call(store: Store) -> None:
    _seed(store)
    policy = RetentionPolicy(max_alert_rows_deleted_per_call=1)
    first = store.maintain(NOW, policy)
    assert first.alert_transitions_deleted == 1 and first.more_to_do
    while store.maintain(NOW, policy).more_to_do:
        pass
    names = [t.alert.name for t in alert_state_of(store).history(-math.inf, math.inf)]
    assert names == ["Recent", "Recent"]
    assert RetentionPolicy(alert_retention_seconds=7 * DAY).alert_retention_seconds == 7 * DAY
