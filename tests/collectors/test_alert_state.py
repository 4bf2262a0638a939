"""The alert-state contract: ``MemoryAlertState`` and the store's ``SQLAlertState`` on SQLite
and PostgreSQL answer the same reads after the same saves, and alerts and silences read back
exactly as saved (any Unicode, NUL, NaN)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from alerts import Alert, AlertState, AlertStateStore, MemoryAlertState, Silence, Transition
from alerts.sql import alert_state_of
from collectors.store import Store, sqlite_url
from tests.collectors.alert_state_cases import (
    IMPLEMENTATIONS,
    Fresh,
    alert_key,
    alerts,
    evaluation_errors,
    fresh_states,
    incident_key,
    silences,
    transition_key,
    transitions,
)


@pytest.fixture(params=IMPLEMENTATIONS)
def fresh(request: pytest.FixtureRequest, tmp_path) -> Iterator[Fresh]:
    """A factory of empty alert-state stores of one implementation (cheap: a SQL store's
    tables are emptied, not re-created, so Hypothesis can call it per example)."""
    yield from fresh_states(request, tmp_path)


def _pending(name: str, at: float, **labels: str) -> Alert:
    return Alert.pending({"alertname": name, **labels}, at, {"summary": "s"}, value=1.0)


def _moved(alert: Alert, at: float, before: AlertState) -> Transition:
    return Transition(at, alert.fingerprint, before, alert.state, alert)


def test_the_sql_store_implements_the_protocol(fresh: Fresh) -> None:
    assert isinstance(fresh(), AlertStateStore)


def test_an_evaluation_replaces_the_active_set_and_appends_history(fresh: Fresh) -> None:
    state = fresh()
    assert state.active_alerts() == [] and state.history(-math.inf, math.inf) == []
    a = _pending("KV", 100.0, target="r1")
    b = _pending("Queue", 100.0)
    state.save_evaluation([a, b], [_moved(a, 100.0, AlertState.INACTIVE)])
    assert [alert_key(x) for x in state.active_alerts()] == [alert_key(a), alert_key(b)]
    fired = a.fire(160.0, value=math.nan)
    resolved_b = b.fire(130.0).resolve(200.0)
    state.save_evaluation(
        [fired, resolved_b],
        [_moved(fired, 160.0, AlertState.PENDING), _moved(resolved_b, 200.0, AlertState.FIRING)],
    )
    # the resolved alert leaves the active set but stays in the history
    assert [alert_key(x) for x in state.active_alerts()] == [alert_key(fired)]
    history = state.history(0, 1_000)
    assert [(t.at_seconds, t.alert.name, t.to_state) for t in history] == [
        (100.0, "KV", AlertState.PENDING),
        (160.0, "KV", AlertState.FIRING),
        (200.0, "Queue", AlertState.RESOLVED),
    ]
    assert math.isnan(history[1].alert.value)
    assert [t.at_seconds for t in state.history(100.0, 160.0)] == [100.0, 160.0]  # inclusive
    assert [t.at_seconds for t in state.history(0, 1_000, alertname="KV")] == [100.0, 160.0]
    assert [t.at_seconds for t in state.history(0, 1_000, limit=1)] == [100.0]
    assert state.history(300, 200) == []
    assert state.history(math.nan, 1_000) == [] and state.history(0, math.nan) == []
    state.save_evaluation([], [])
    assert state.active_alerts() == [] and len(state.history(0, 1_000)) == 3


def test_history_limit_must_be_positive(fresh: Fresh) -> None:
    with pytest.raises(ValueError, match="limit=0"):
        fresh().history(0, 1, limit=0)


def test_a_silence_is_replaced_by_id_and_keeps_its_place(fresh: Fresh) -> None:
    state = fresh()
    first = Silence("s1", 'alertname="KV"', 0.0, 100.0, "me", "drain")
    second = Silence("s2", 'alertname=~"Q.*"', 0.0, 50.0, "you", "deploy")
    state.save_silence(first)
    state.save_silence(second)
    state.save_silence(first.expire(10.0))
    assert state.silences() == [first.expire(10.0), second]


def test_history_paging_with_a_name_filter_is_complete(fresh: Fresh) -> None:
    # NOTE: "a\x00b" and "a\ufffdb" share the SQL copy of the name; the exact comparison
    # must keep them apart, and the paged read must still find ``limit`` rows.
    state = fresh()
    nul, lookalike = _pending("a\x00b", 0.0), _pending("a\ufffdb", 0.0)
    steps = [_moved(lookalike, float(i), AlertState.INACTIVE) for i in range(1_500)]
    steps += [_moved(nul, 2_000.0 + i, AlertState.INACTIVE) for i in range(3)]
    state.save_evaluation([], steps)
    found = state.history(0, 10_000, alertname="a\x00b", limit=2)
    assert [(t.at_seconds, t.alert.name) for t in found] == [
        (2_000.0, "a\x00b"),
        (2_001.0, "a\x00b"),
    ]
    assert len(state.history(0, 10_000, alertname="a\ufffdb")) == 1_500


def test_bad_transitions_are_refused_and_nothing_is_written(tmp_path) -> None:
    store = Store(sqlite_url(tmp_path / "tw.db"))
    try:
        state = alert_state_of(store)
        alert = _pending("KV", 1.0)
        for bad, message in (
            (
                Transition(math.inf, alert.fingerprint, AlertState.INACTIVE, alert.state, alert),
                "at_seconds",
            ),
            (Transition(1.0, "nope", AlertState.INACTIVE, alert.state, alert), "fingerprint"),
        ):
            with pytest.raises(ValueError, match=message):
                state.save_evaluation([alert], [bad])
            assert state.active_alerts() == [] and state.history(-math.inf, math.inf) == []
    finally:
        store.close()


def test_nul_is_escaped_in_json_and_replaced_in_plain_columns(tmp_path) -> None:
    store = Store(sqlite_url(tmp_path / "tw.db"))
    try:
        alert = _pending("a\x00b", 5.0, note="x\x00y")
        alert_state_of(store).save_evaluation([alert], [_moved(alert, 5.0, AlertState.INACTIVE)])
        alert_state_of(store).save_silence(
            Silence("i\x00d", 'a="\x00"', 0.0, 1.0, "m\x00", "c\x00")
        )
        with store.engine.connect() as connection:
            name, payload = connection.execute(
                text("SELECT alertname, alert_json FROM alert_transitions")
            ).one()
            silence = connection.execute(
                text("SELECT id, matchers, created_by, comment FROM silences")
            ).one()
        assert name == "a\ufffdb" and "\x00" not in payload and "a\\u0000b" in payload
        assert tuple(silence) == ("i\ufffdd", '{a="\ufffd"}', "m\ufffd", "c\ufffd")
        assert alert_state_of(store).silences()[0].id == "i\x00d"
    finally:
        store.close()


# -- the property: random saves, same reads -----------------------------------------------------

OPERATIONS = st.lists(
    st.one_of(
        st.tuples(
            st.just("evaluate"),
            st.lists(alerts(), max_size=4),
            st.lists(transitions(), max_size=4),
            st.lists(evaluation_errors(), max_size=2),
            st.one_of(st.none(), st.floats(-1e12, 1e12)),
        ),
        st.tuples(st.just("silence"), silences()),
    ),
    max_size=6,
)
QUERIES = st.lists(
    st.tuples(
        st.floats(allow_nan=False),
        st.floats(allow_nan=False),
        st.one_of(st.none(), st.sampled_from(["KVSaturation", "a\x00b", "a\ufffdb", ""])),
        st.integers(1, 5),
    ),
    max_size=3,
)


def _reads(state: AlertStateStore, queries: list) -> tuple:
    history = [
        [transition_key(t) for t in state.history(start, end, alertname=name, limit=limit)]
        for start, end, name, limit in [(-math.inf, math.inf, None, 10_000), *queries]
    ]
    incidents = [
        [incident_key(i) for i in state.incidents(since_seconds=start, limit=limit)]
        for start, _, _, limit in [(-math.inf, None, None, 100), *queries]
    ]
    every = state.incidents(limit=1_000)
    assert [incident_key(state.incident(i.id)) for i in every] == [incident_key(i) for i in every]  # type: ignore[arg-type]
    return (
        [alert_key(a) for a in state.active_alerts()],
        history,
        state.silences(),
        incidents,
        state.evaluation_health(),
    )


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=OPERATIONS, queries=QUERIES)
def test_random_saves_read_back_as_in_memory(fresh: Fresh, operations: list, queries: list) -> None:
    state, memory = fresh(), MemoryAlertState()
    for operation in operations:
        for target in (state, memory):
            if operation[0] == "evaluate":
                target.save_evaluation(*operation[1:])
            else:
                target.save_silence(operation[1])
        assert _reads(state, queries) == _reads(memory, queries)


def test_a_new_store_on_the_same_database_resumes_the_saved_state(store_url: str) -> None:
    # NOTE: what a restarted evaluator sees: a pending alert keeps its active time (its for:
    # counts on), a firing one its start and keep_firing_since (no second page).
    pending = _pending("Queue", 100.0)
    held = _pending("KV", 50.0).fire(80.0).keep_firing(120.0)
    silence = Silence("s1", 'alertname="KV"', 0.0, 500.0, "me", "drain")
    first = Store(store_url)
    try:
        alert_state_of(first).save_evaluation(
            [pending, held], [_moved(held, 80.0, AlertState.PENDING)]
        )
        alert_state_of(first).save_silence(silence)
    finally:
        first.close()
    second = Store(store_url, migrate=False)
    try:
        assert alert_state_of(second).active_alerts() == [pending, held]
        assert alert_state_of(second).active_alerts()[1].keep_firing_since_seconds == 120.0
        assert alert_state_of(second).silences() == [silence]
        assert [t.alert for t in alert_state_of(second).history(0, 100)] == [held]
    finally:
        second.close()
