"""Silences: state against an explicit clock, validation, expiry, and which alerts they mute."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alerts import (
    Alert,
    Silence,
    SilenceError,
    SilenceState,
    parse_matchers,
    postable_silence,
    silenced_alerts,
    silenced_by,
)

NOW = 1_800_000_000.0


def make(matchers='alertname="KVSaturation"', start=NOW, end=NOW + 3600, silence_id="s1"):
    return Silence.create(matchers, start, end, "oncall@example", "known: drill", NOW, silence_id)


@pytest.mark.parametrize(
    ("now", "state"),
    [
        (NOW - 1, SilenceState.PENDING),
        (NOW, SilenceState.ACTIVE),  # starts_at is included
        (NOW + 3599.999, SilenceState.ACTIVE),
        (NOW + 3600, SilenceState.EXPIRED),  # ends_at is not
        (NOW + 10**6, SilenceState.EXPIRED),
    ],
)
def test_state_against_the_clock(now, state):
    silence = Silence("s1", parse_matchers('alertname="X"'), NOW, NOW + 3600, "me", "why")
    assert silence.state(now) is state


@pytest.mark.parametrize(
    ("kwargs", "field", "fragment"),
    [
        ({"matchers": ""}, "matchers", "at least one matcher"),
        ({"matchers": "{}"}, "matchers", "at least one matcher"),
        ({"matchers": 'team=""'}, "matchers", "must not match the empty string"),
        ({"matchers": 'team=~".*", x!~"y"'}, "matchers", "must not match the empty string"),
        ({"end": NOW}, "ends_at_seconds", "positive duration"),
        ({"end": NOW - 60}, "ends_at_seconds", "before starts_at_seconds"),
        ({"start": NOW - 7200, "end": NOW - 60}, "ends_at_seconds", "already be expired"),
        ({"start": float("nan")}, "starts_at_seconds", "finite"),
        ({"silence_id": " "}, "id", "non-empty"),
    ],
)
def test_invalid_new_silences_are_rejected_naming_the_field(kwargs, field, fragment):
    with pytest.raises(SilenceError) as caught:
        make(**kwargs)
    assert caught.value.field == field
    assert fragment in str(caught.value)


def test_bad_matcher_text_is_a_matcher_error_naming_it():
    with pytest.raises(ValueError, match=r"matcher 'severity=~\"\(\"'"):
        make('severity=~"("')


@pytest.mark.parametrize(
    ("created_by", "comment", "field"), [("", "c", "created_by"), ("me", " ", "comment")]
)
def test_author_and_comment_are_required(created_by, comment, field):
    with pytest.raises(SilenceError) as caught:
        Silence.create('alertname="X"', NOW, NOW + 60, created_by, comment, NOW)
    assert caught.value.field == field


def test_a_start_in_the_past_moves_to_now_and_an_id_is_generated():
    silence = Silence.create('alertname="X"', NOW - 600, NOW + 60, "me", "why", NOW)
    assert silence.starts_at_seconds == NOW
    assert len(silence.id) == 36
    future = Silence.create('alertname="X"', NOW + 600, NOW + 900, "me", "why", NOW)
    assert future.starts_at_seconds == NOW + 600


def test_expiry():
    active = make()
    expired = active.expire(NOW + 10)
    assert expired.ends_at_seconds == NOW + 10
    assert expired.state(NOW + 10) is SilenceState.EXPIRED
    assert expired.expire(NOW + 20) is expired  # already expired: unchanged
    pending = make(start=NOW + 100, end=NOW + 200)
    ended = pending.expire(NOW + 5)
    assert (ended.starts_at_seconds, ended.ends_at_seconds) == (NOW + 5, NOW + 5)
    assert ended.state(NOW + 5) is SilenceState.EXPIRED


def _alert(**labels):
    return Alert.pending({"alertname": "KVSaturation", **labels}, NOW - 100).fire(NOW - 50)


def test_which_alerts_a_set_of_silences_mutes():
    kv_a = _alert(target="a")
    kv_b = _alert(target="b")
    other = Alert.pending({"alertname": "QueueGrowth", "target": "a"}, NOW - 10).fire(NOW - 5)
    silences = [
        make('alertname="KVSaturation", target=~"a|c"', silence_id="s-kv-a"),
        make('target="a"', silence_id="s-target-a"),
        make('alertname="KVSaturation"', start=NOW + 60, end=NOW + 120, silence_id="s-later"),
    ]
    muted = silenced_alerts([kv_a, kv_b, other], silences, NOW)
    assert muted == {kv_a.fingerprint: ("s-kv-a", "s-target-a"), other.fingerprint: ("s-target-a",)}
    assert silenced_by(kv_b.labels, silences, NOW) == ()
    assert silenced_by(kv_b.labels, silences, NOW + 60) == ("s-later",)
    assert silenced_by(kv_a.labels, [s.expire(NOW) for s in silences], NOW) == ()


@settings(max_examples=80, deadline=None)
@given(
    st.floats(min_value=-1e12, max_value=1e12),
    st.floats(min_value=1e-3, max_value=1e9),
    st.floats(min_value=-1e12, max_value=1e12),
)
def test_exactly_one_state_and_mute_only_when_active(start, duration, now):
    silence = Silence("s", parse_matchers("a=1"), start, start + duration, "me", "why")
    state = silence.state(now)
    assert (
        state
        is {
            True: SilenceState.PENDING,
            False: SilenceState.ACTIVE if now < start + duration else SilenceState.EXPIRED,
        }[now < start]
    )
    assert silence.mutes({"a": "1"}, now) is (state is SilenceState.ACTIVE)


def test_postable_silence_is_alertmanagers_v2_shape():
    silence = make('alertname="X", a!="1", b=~"2|3", c!~"4"')
    assert postable_silence(silence) == {
        "matchers": [
            {"name": "alertname", "value": "X", "isRegex": False, "isEqual": True},
            {"name": "a", "value": "1", "isRegex": False, "isEqual": False},
            {"name": "b", "value": "2|3", "isRegex": True, "isEqual": True},
            {"name": "c", "value": "4", "isRegex": True, "isEqual": False},
        ],
        "startsAt": "2027-01-15T08:00:00.000Z",
        "endsAt": "2027-01-15T09:00:00.000Z",
        "createdBy": "oncall@example",
        "comment": "known: drill",
    }


def test_silenced_alerts_refuses_one_label_set_twice():
    alert = _alert(target="a")
    with pytest.raises(ValueError, match="pass each alert once"):
        silenced_alerts([alert, alert], [make()], NOW)
