"""Hypothesis strategies, comparison helpers and the store factory of the alert-state
contract tests."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import pytest
from hypothesis import strategies as st
from sqlalchemy import delete, text

from alerts import (
    Alert,
    AlertState,
    AlertStateStore,
    EvaluationError,
    Incident,
    Matcher,
    MatchType,
    MemoryAlertState,
    Silence,
    Transition,
)
from alerts.sql import alert_state_of
from collectors.store import Store, sqlite_url
from collectors.store.alert_models import (
    EvaluatorStateRow,
    IncidentRow,
    NotifiedRow,
    RuleFailureRow,
)
from collectors.store.models import AlertStateRow, AlertTransitionRow, SilenceRow
from tests.collectors.conftest import _empty_postgres

IMPLEMENTATIONS = ("memory", "sqlite", "postgresql")
Fresh = Callable[[], AlertStateStore]
_TABLES = (
    AlertStateRow,
    AlertTransitionRow,
    SilenceRow,
    IncidentRow,
    RuleFailureRow,
    EvaluatorStateRow,
    NotifiedRow,
)


def fresh_states(request: pytest.FixtureRequest, tmp_path) -> Iterator[Fresh]:
    """The ``fresh`` fixture's body: a factory of empty alert-state stores of the
    implementation ``request.param`` names. A SQL store's tables are emptied and the incident
    ids restarted, so the ids match ``MemoryAlertState``'s (1, 2, … in first-seen order)."""
    if request.param == "memory":
        yield MemoryAlertState
        return
    if request.param == "sqlite":
        url = sqlite_url(tmp_path / "tw.db")
    else:
        url = request.getfixturevalue("postgres_store_url")
        _empty_postgres(url)
    store = Store(url)

    def empty() -> AlertStateStore:
        with store.engine.begin() as connection:
            for table in _TABLES:
                connection.execute(delete(table))
            if connection.dialect.name == "sqlite":
                connection.execute(text("DELETE FROM sqlite_sequence"))
            else:
                connection.execute(text("ALTER SEQUENCE alert_incidents_id_seq RESTART WITH 1"))
        return alert_state_of(store)

    try:
        yield empty
    finally:
        store.close()


NAMES = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: n != "alertname"
)
#: Any text (Hypothesis's default alphabet: every code point but surrogates, NUL included),
#: plus a few values that stress the encodings.
TEXT = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["\x00", "a\x00b", "\u2028", "\\u0000", '"', "\ufffd", "x" * 300]),
)
TIMES = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False)
VALUES = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))
#: A small pool of alert names, so filters by name select some transitions and not others.
ALERTNAMES = st.one_of(st.sampled_from(["KVSaturation", "a\x00b", "a\ufffdb", "é" * 300]), TEXT)


@st.composite
def alerts(draw: st.DrawFn, states: tuple[AlertState, ...] = tuple(AlertState)) -> Alert:
    labels = draw(st.dictionaries(NAMES, TEXT, max_size=4))
    labels["alertname"] = draw(ALERTNAMES.filter(bool))
    annotations = draw(st.dictionaries(NAMES, TEXT, max_size=3))
    state = draw(st.sampled_from(states))
    times: dict[str, float | None] = {}
    if state is not AlertState.INACTIVE:
        times["active_at_seconds"] = active = draw(TIMES)
        if state in (AlertState.FIRING, AlertState.RESOLVED):
            times["started_at_seconds"] = started = active + draw(st.floats(0, 1e6))
            if state is AlertState.RESOLVED:
                times["ended_at_seconds"] = started + draw(st.floats(0, 1e6))
            elif draw(st.booleans()):
                times["keep_firing_since_seconds"] = started + draw(st.floats(0, 1e6))
    return Alert(
        labels=labels,
        state=state,
        annotations=annotations,
        value=draw(VALUES),
        generator_url=draw(TEXT),
        **times,
    )


@st.composite
def transitions(draw: st.DrawFn) -> Transition:
    alert = draw(alerts())
    return Transition(
        at_seconds=draw(TIMES),
        fingerprint=alert.fingerprint,
        from_state=draw(st.sampled_from(list(AlertState))),
        to_state=alert.state,
        alert=alert,
    )


SILENCE_IDS = st.one_of(
    st.sampled_from(["s1", "s2", "\x00", "x" * 400]),
    st.text(min_size=1, max_size=40).filter(lambda t: t.strip() != ""),
)


@st.composite
def silences(draw: st.DrawFn) -> Silence:
    matchers = [Matcher(draw(NAMES), MatchType.EQUAL, draw(TEXT.filter(bool)))]
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from(list(MatchType)))
        if kind in (MatchType.REGEX, MatchType.NOT_REGEX):
            value = draw(st.sampled_from(["5..", "page|ticket", ".*", "a\x00b"]))
        else:
            value = draw(TEXT)
        matchers.append(Matcher(draw(NAMES), kind, value))
    start = draw(TIMES)
    return Silence(
        id=draw(SILENCE_IDS),
        matchers=tuple(matchers),
        starts_at_seconds=start,
        ends_at_seconds=start + draw(st.floats(0, 1e7)),
        created_by=draw(TEXT),
        comment=draw(TEXT),
    )


def _float(value: float | None) -> object:
    return "NaN" if value is not None and math.isnan(value) else value


def alert_key(alert: Alert) -> tuple:
    """Every field of ``alert``, NaN made comparable (NaN != NaN)."""
    return (
        alert.labels.pairs,
        alert.annotations.pairs,
        alert.state,
        alert.active_at_seconds,
        alert.started_at_seconds,
        alert.ended_at_seconds,
        _float(alert.value),
        alert.generator_url,
        alert.keep_firing_since_seconds,
    )


def transition_key(transition: Transition) -> tuple:
    return (
        transition.at_seconds,
        transition.fingerprint,
        transition.from_state,
        transition.to_state,
        alert_key(transition.alert),
    )


def incident_key(incident: Incident) -> tuple:
    return (incident.id, alert_key(incident.alert))


RULES = st.sampled_from(["tail-latency-ttft", "r\x00", "é" * 300, "x"])


@st.composite
def evaluation_errors(draw: st.DrawFn) -> EvaluationError:
    return EvaluationError(draw(RULES), draw(TIMES), draw(TEXT), draw(TEXT))
