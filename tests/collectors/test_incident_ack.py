"""Acknowledging incidents (revision 0007): the same on the memory, SQLite and PostgreSQL
states; kept through the evaluator's saves and the incident's resolution; refused for an
unknown or resolved incident; and a 0006 store upgrades in place, its incidents
unacknowledged and acknowledgeable."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from alembic.script import ScriptDirectory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import inspect, text

from alerts import (
    MAX_ACK_BY,
    MAX_ACK_COMMENT,
    Acknowledgement,
    AcknowledgementError,
    Alert,
    AlertState,
    Transition,
)
from alerts.sql import alert_state_of
from alerts.sql.codec import encode_alert
from collectors.store import SchemaOutOfDateError, Store, sqlite_url
from collectors.store.connection import make_engine
from collectors.store.schema import alembic_config, upgrade_schema
from tests.collectors.alert_state_cases import IMPLEMENTATIONS, Fresh, fresh_states

KV = Alert.pending({"alertname": "KV", "severity": "page"}, 100.0).fire(160.0, value=0.9)
QUEUE = Alert.pending({"alertname": "Queue"}, 200.0).fire(260.0, value=41.0)


@pytest.fixture(params=IMPLEMENTATIONS)
def fresh(request: pytest.FixtureRequest, tmp_path) -> Iterator[Fresh]:
    yield from fresh_states(request, tmp_path)


def _fired(state, *alerts: Alert) -> None:
    state.save_evaluation(
        list(alerts),
        [
            Transition(a.started_at_seconds, a.fingerprint, AlertState.PENDING, a.state, a)
            for a in alerts
        ],
    )


def test_an_ack_is_recorded_replaced_undone_and_mutes_nothing(fresh: Fresh) -> None:
    state = fresh()
    _fired(state, KV, QUEUE)
    assert state.incident(1).ack is None
    first = Acknowledgement("alice", 300.0, "looking at KV")
    assert state.acknowledge(1, first) is None
    assert state.incident(1).ack == first
    assert state.incident(2).ack is None
    assert [i.ack for i in state.incidents()] == [None, first]  # Queue (newer) first
    # acknowledging again replaces who and when, and returns what it replaced
    second = Acknowledgement("bob", 400.0)
    assert state.acknowledge(1, second) == first
    assert state.incident(1).ack == second
    # the evaluator's next save updates the alert and keeps the acknowledgement
    _ = state.save_evaluation([KV, QUEUE], [])
    assert state.incident(1).ack == second and state.active_alerts() == [KV, QUEUE]
    assert state.unacknowledge(1) == second
    assert state.incident(1).ack is None
    with pytest.raises(AcknowledgementError, match="incident 1 is not acknowledged"):
        state.unacknowledge(1)


def test_a_resolved_incident_keeps_its_ack_and_refuses_changes(fresh: Fresh) -> None:
    state = fresh()
    _fired(state, KV)
    ack = Acknowledgement("alice", 300.0, "on it")
    state.acknowledge(1, ack)
    done = KV.resolve(500.0)
    state.save_evaluation(
        [], [Transition(500.0, done.fingerprint, AlertState.FIRING, done.state, done)]
    )
    incident = state.incident(1)
    assert incident.state == "resolved" and incident.ack == ack
    with pytest.raises(AcknowledgementError, match="incident 1 is resolved"):
        state.acknowledge(1, Acknowledgement("bob", 600.0))
    with pytest.raises(AcknowledgementError, match="incident 1 is resolved"):
        state.unacknowledge(1)
    assert state.incident(1).ack == ack


@pytest.mark.parametrize("incident_id", [2, 0, -1, 2**63, True])
def test_an_unknown_incident_cannot_be_acknowledged(fresh: Fresh, incident_id) -> None:
    state = fresh()
    _fired(state, KV)
    with pytest.raises(AcknowledgementError, match="no incident has id"):
        state.acknowledge(incident_id, Acknowledgement("alice", 1.0))
    with pytest.raises(AcknowledgementError, match="no incident has id"):
        state.unacknowledge(incident_id)
    assert state.incident(1).ack is None


@pytest.mark.parametrize(
    ("by", "at", "comment", "field"),
    [
        ("", 1.0, "", "by"),
        ("   ", 1.0, "", "by"),
        ("a" * (MAX_ACK_BY + 1), 1.0, "", "by"),
        ("al\x00ice", 1.0, "", "by"),
        ("ali\nce", 1.0, "", "by"),
        ("alice", 1.0, "x" * (MAX_ACK_COMMENT + 1), "comment"),
        ("alice", 1.0, "line\nbreak", "comment"),
        ("alice", 1.0, "bidi \u202e", "comment"),
        ("alice", 1.0, "sep \u2028 x", "comment"),
        ("alice", math.nan, "", "at_seconds"),
        ("alice", math.inf, "", "at_seconds"),
    ],
)
def test_bad_fields_are_refused(by: str, at: float, comment: str, field: str) -> None:
    with pytest.raises(AcknowledgementError) as raised:
        Acknowledgement.create(by, at, comment)
    assert raised.value.field == field


def test_create_trims_and_the_longest_fields_are_kept() -> None:
    assert Acknowledgement.create("  alice ", 1.0, " why ") == Acknowledgement("alice", 1.0, "why")
    Acknowledgement("b" * MAX_ACK_BY, 1.0, "c" * MAX_ACK_COMMENT)
    with pytest.raises(AcknowledgementError):
        Acknowledgement(" alice", 1.0)  # the constructor does not trim: it refuses


#: Text an acknowledgement may hold: any code point but control, format, separators and
#: surrogates, as Hypothesis draws it (NUL, newline and bidi overrides included, to be refused).
ACK_TEXT = st.text(max_size=MAX_ACK_COMMENT + 20)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(by=ACK_TEXT, comment=ACK_TEXT)
def test_any_text_is_refused_or_reads_back_exactly(fresh: Fresh, by: str, comment: str) -> None:
    state = fresh()
    _fired(state, KV)
    try:
        ack = Acknowledgement.create(by, 300.5, comment)
    except AcknowledgementError:
        return
    state.acknowledge(1, ack)
    assert state.incident(1).ack == ack
    assert state.incidents()[0].ack == ack


# -- revision 0007 --------------------------------------------------------------------------


def test_the_ack_revision_follows_0006() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    assert script.get_revision("0007").down_revision == "0006"


def test_a_0006_store_upgrades_in_place_with_its_incidents(tmp_path) -> None:
    url = sqlite_url(tmp_path / "old.db")
    engine = make_engine(url)
    upgrade_schema(engine, "0006")
    engine.dispose()
    # an incident as revision 0006 stored it (the ack columns do not exist yet)
    engine = make_engine(url)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO alert_incidents (fingerprint, alertname, severity, "
                "active_at_seconds, started_at_seconds, resolved_at_seconds, alert_json) "
                "VALUES (:f, 'KV', 'page', 100.0, 160.0, NULL, :j)"
            ),
            {"f": KV.fingerprint, "j": encode_alert(KV)},
        )
    assert "ack_by" not in {c["name"] for c in inspect(engine).get_columns("alert_incidents")}
    engine.dispose()
    with pytest.raises(SchemaOutOfDateError, match="revision 0006"):
        Store(url, migrate=False)
    store = Store(url)  # migrates
    try:
        state = alert_state_of(store)
        incident = state.incident(1)
        assert incident is not None and incident.alert == KV and incident.ack is None
        ack = Acknowledgement("alice", 300.0, "on it")
        assert state.acknowledge(1, ack) is None
        assert state.incident(1).ack == ack
    finally:
        store.close()
