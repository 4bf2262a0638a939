"""The alert model: states, times, transitions, validation."""

from __future__ import annotations

import math

import pytest

from alerts import Alert, AlertError, AlertState, LabelError, LabelSet

LABELS = {"alertname": "TailLatency", "severity": "page", "slo": "ttft"}


def test_lifecycle_pending_firing_resolved_keeps_identity():
    pending = Alert.pending(LABELS, 100.0, annotations={"summary": "p99 TTFT high"}, value=2.5)
    firing = pending.fire(160.0, value=3.0)
    resolved = firing.resolve(400.0)
    assert [a.state for a in (pending, firing, resolved)] == [
        AlertState.PENDING,
        AlertState.FIRING,
        AlertState.RESOLVED,
    ]
    assert resolved.active_at_seconds == 100.0
    assert resolved.started_at_seconds == 160.0
    assert resolved.ended_at_seconds == 400.0
    assert resolved.value == 3.0  # the last evaluated value is kept when none is given
    assert pending.fingerprint == firing.fingerprint == resolved.fingerprint
    assert resolved.fingerprint == LabelSet(LABELS).fingerprint().to_bytes(8, "big").hex()
    assert resolved.annotations["summary"] == "p99 TTFT high"
    assert resolved.name == "TailLatency"


@pytest.mark.parametrize(
    ("action", "alert"),
    [
        ("fire", Alert(LABELS, AlertState.INACTIVE)),
        ("resolve", Alert.pending(LABELS, 1.0)),
        ("fire", Alert.pending(LABELS, 1.0).fire(2.0)),
        ("resolve", Alert.pending(LABELS, 1.0).fire(2.0).resolve(3.0)),
    ],
)
def test_transitions_the_lifecycle_lacks_are_refused(action, alert):
    with pytest.raises(AlertError, match=f"cannot {action} a {alert.state.value} alert"):
        getattr(alert, action)(10.0)


@pytest.mark.parametrize(
    ("kwargs", "field", "fragment"),
    [
        ({"state": AlertState.PENDING}, "active_at_seconds", "needs it"),
        ({"state": AlertState.FIRING, "active_at_seconds": 1.0}, "started_at_seconds", "needs it"),
        (
            {"state": AlertState.PENDING, "active_at_seconds": 1.0, "started_at_seconds": 2.0},
            "started_at_seconds",
            "has none",
        ),
        ({"state": AlertState.INACTIVE, "ended_at_seconds": 1.0}, "ended_at_seconds", "has none"),
        (
            {"state": AlertState.FIRING, "active_at_seconds": 5.0, "started_at_seconds": 4.0},
            "started_at_seconds",
            "before active_at_seconds",
        ),
        (
            {
                "state": AlertState.RESOLVED,
                "active_at_seconds": 1.0,
                "started_at_seconds": 5.0,
                "ended_at_seconds": 4.0,
            },
            "ended_at_seconds",
            "before started_at_seconds",
        ),
        (
            {"state": AlertState.PENDING, "active_at_seconds": math.inf},
            "active_at_seconds",
            "finite",
        ),
        ({"state": AlertState.PENDING, "active_at_seconds": "now"}, "active_at_seconds", "number"),
        ({"state": "exploded"}, "state", "is not one of"),
        ({"state": AlertState.INACTIVE, "value": "high"}, "value", "number"),
    ],
)
def test_contradictory_fields_are_rejected_naming_the_field(kwargs, field, fragment):
    with pytest.raises(AlertError) as caught:
        Alert(LABELS, **kwargs)
    assert caught.value.field == field
    assert fragment in str(caught.value)


def test_state_may_be_given_as_text():
    assert Alert(LABELS, "pending", active_at_seconds=1.0).state is AlertState.PENDING


def test_alertname_is_required():
    with pytest.raises(AlertError, match="needs an 'alertname' label"):
        Alert({"severity": "page"}, AlertState.INACTIVE)


def test_bad_label_and_annotation_names_say_which_set():
    with pytest.raises(LabelError, match=r"^labels: label 'bad-name'"):
        Alert({"alertname": "X", "bad-name": "v"}, AlertState.INACTIVE)
    with pytest.raises(LabelError, match=r"^annotations: label '9lives'"):
        Alert({"alertname": "X"}, AlertState.INACTIVE, annotations={"9lives": "v"})


def test_nan_value_is_recorded_not_rejected():
    alert = Alert.pending(LABELS, 1.0, value=math.nan)
    assert math.isnan(alert.value)


def test_alerts_are_frozen_and_hashable():
    alert = Alert.pending(LABELS, 1.0)
    with pytest.raises(AttributeError):
        alert.state = AlertState.FIRING  # type: ignore[misc]
    assert len({alert, Alert.pending(LABELS, 1.0)}) == 1


def test_keep_firing_for_hold_is_recorded_and_cleared():
    firing = Alert.pending(LABELS, 1.0).fire(2.0)
    held = firing.keep_firing(5.0)
    assert held.keep_firing_since_seconds == 5.0
    assert held.keep_firing(7.0).keep_firing_since_seconds == 5.0  # the first hold counts
    assert held.keep_firing(None).keep_firing_since_seconds is None  # condition back
    assert held.resolve(9.0).keep_firing_since_seconds is None
    with pytest.raises(AlertError, match="cannot keep firing a pending alert"):
        Alert.pending(LABELS, 1.0).keep_firing(3.0)
    with pytest.raises(AlertError, match="before started_at_seconds"):
        firing.keep_firing(1.5)
    with pytest.raises(AlertError, match="only a firing alert is kept firing"):
        Alert(LABELS, AlertState.PENDING, active_at_seconds=1.0, keep_firing_since_seconds=2.0)
