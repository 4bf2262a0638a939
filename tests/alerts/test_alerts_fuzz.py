"""Every outside-facing constructor, fed arbitrary strings and numbers at their extremes, either
builds a valid object or raises the package's own error, never anything else."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from alerts import (
    Alert,
    AlertsError,
    InhibitRule,
    LabelSet,
    NotifierConfigError,
    RetryPolicy,
    Silence,
    WebhookNotifier,
)

SETTINGS = settings(max_examples=150, deadline=None)
any_text = st.text(st.characters(exclude_categories=()), max_size=24)  # surrogates included
any_number = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.none(),
    st.booleans(),
    any_text,
)


@SETTINGS
@given(
    st.dictionaries(any_text, any_text, max_size=5), st.dictionaries(any_text, any_text, max_size=3)
)
def test_label_sets_and_alerts(labels, annotations):
    try:
        alert = Alert.pending({"alertname": "X", **labels}, 1.0, annotations=annotations)
    except AlertsError:
        return
    assert len(alert.fingerprint) == 16
    assert LabelSet(alert.labels) == alert.labels


@SETTINGS
@given(
    st.sampled_from(["inactive", "pending", "firing", "resolved", "x"]),
    any_number,
    any_number,
    any_number,
    any_number,
)
def test_alert_times_and_values(state, active, started, ended, value):
    try:
        alert = Alert(
            {"alertname": "X"},
            state,
            active_at_seconds=active,
            started_at_seconds=started,
            ended_at_seconds=ended,
            value=value,
        )
    except AlertsError:
        return
    times = [active, started, ended][: ["inactive", "pending", "firing", "resolved"].index(state)]
    assert all(t is not None for t in times)
    assert times == sorted(times)
    assert alert.state.value == state


@SETTINGS
@given(
    st.one_of(any_text, st.sampled_from(['alertname="X"', "a=~.+", 'a=""', "{}"])),
    any_number,
    any_number,
    st.one_of(any_text, st.just("me")),
    st.one_of(any_text, st.just("why")),
    any_number,
)
def test_silences(matchers, start, end, created_by, comment, now):
    try:
        silence = Silence.create(matchers, start, end, created_by, comment, now)  # type: ignore[arg-type]
    except AlertsError:
        return
    assert now <= silence.starts_at_seconds < silence.ends_at_seconds
    assert silence.matchers


@SETTINGS
@given(
    any_text,
    st.one_of(any_text, st.just('severity="page"')),
    st.one_of(any_text, st.just('severity="ticket"')),
    st.lists(st.one_of(any_text, st.just("slo")), max_size=3),
)
def test_inhibit_rules(name, source, target, equal):
    try:
        rule = InhibitRule(name, source, target, tuple(equal))  # type: ignore[arg-type]
    except AlertsError:
        return
    assert rule.source_matchers
    assert rule.target_matchers


@SETTINGS
@given(
    st.one_of(any_text, st.just("http://127.0.0.1:1/hook")),
    st.one_of(any_number, st.just(5.0)),
    st.one_of(any_number, st.just(3)),
    st.one_of(any_number, st.just(0.5)),
    st.one_of(any_number, st.just(2.0)),
)
def test_notifier_configuration(url, timeout, attempts, base, cap):
    try:
        policy = RetryPolicy(attempts, base, cap)  # type: ignore[arg-type]
        WebhookNotifier(url, timeout_seconds=timeout, retry=policy)  # type: ignore[arg-type]
    except NotifierConfigError:
        return
    assert 1 <= policy.max_attempts <= 100
    assert 0 <= policy.base_delay_seconds <= policy.max_delay_seconds
