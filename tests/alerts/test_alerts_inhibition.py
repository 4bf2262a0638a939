"""Inhibition with Alertmanager's semantics (inhibit/inhibit.go) and the built-in rule."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alerts import (
    DEFAULT_INHIBIT_RULES,
    Alert,
    AlertError,
    AlertState,
    InhibitRule,
    InhibitRuleError,
    LabelSet,
    inhibited_alerts,
    inhibited_by,
)


def firing(**labels):
    return Alert.pending(labels, 100.0).fire(160.0)


def pending(**labels):
    return Alert.pending(labels, 100.0)


def resolved(**labels):
    return firing(**labels).resolve(300.0)


PAGE_TTFT = firing(alertname="SLOBurnRate", severity="page", slo="ttft")
TICKET_TTFT = firing(alertname="SLOBurnRate", severity="ticket", slo="ttft")
TICKET_ITL = firing(alertname="SLOBurnRate", severity="ticket", slo="itl")
TAIL_PAGE_TTFT = firing(alertname="TailLatency", severity="page", slo="ttft")
PAGE_NO_SLO = firing(alertname="TargetDown", severity="page")
TICKET_NO_SLO = firing(alertname="PrefixHitDrop", severity="ticket")


@pytest.mark.parametrize(
    ("target", "others", "inhibitor"),
    [
        (TICKET_TTFT, [PAGE_TTFT], PAGE_TTFT),  # the default rule
        (TICKET_TTFT, [TAIL_PAGE_TTFT], TAIL_PAGE_TTFT),  # any alertname with the same slo
        (TICKET_ITL, [PAGE_TTFT], None),  # different slo
        (TICKET_NO_SLO, [PAGE_NO_SLO], None),  # absent == absent is not enough here
        (TICKET_TTFT, [PAGE_NO_SLO], None),
        (PAGE_TTFT, [TICKET_TTFT], None),  # a ticket never inhibits a page
        (TICKET_TTFT, [pending(alertname="SLOBurnRate", severity="page", slo="ttft")], None),
        (TICKET_TTFT, [resolved(alertname="SLOBurnRate", severity="page", slo="ttft")], None),
        (
            pending(alertname="SLOBurnRate", severity="ticket", slo="ttft"),
            [PAGE_TTFT],
            PAGE_TTFT,  # only the source must fire
        ),
    ],
)
def test_default_rule(target, others, inhibitor):
    expected = None if inhibitor is None else inhibitor.fingerprint
    assert inhibited_by(target, [target, *others], DEFAULT_INHIBIT_RULES) == expected


def test_absent_equal_labels_count_as_equal_in_a_plain_rule():
    rule = InhibitRule("r", 'severity="page"', 'severity="ticket"', ("cluster",))
    assert inhibited_by(TICKET_NO_SLO, [PAGE_NO_SLO], [rule]) == PAGE_NO_SLO.fingerprint


def test_an_alert_never_inhibits_itself():
    # source and target matchers both match the same alert
    rule = InhibitRule("self", 'alertname="Noisy"', 'alertname="Noisy"', ("alertname",))
    noisy = firing(alertname="Noisy", instance="a")
    twin = firing(alertname="Noisy", instance="b")
    assert inhibited_by(noisy, [noisy], [rule]) is None
    # two alerts matching both sides do not inhibit each other either (excludeTwoSidedMatch)
    assert inhibited_alerts([noisy, twin], [rule]) == {}


def test_a_target_that_is_also_a_source_can_be_inhibited_by_a_pure_source():
    rule = InhibitRule("r", 'severity=~"page|critical"', 'severity=~"page|ticket"', ("slo",))
    critical = firing(alertname="A", severity="critical", slo="x")
    page = firing(alertname="B", severity="page", slo="x")
    assert inhibited_alerts([critical, page], [rule]) == {page.fingerprint: critical.fingerprint}


def test_inhibited_alerts_over_a_set():
    muted = inhibited_alerts([PAGE_TTFT, TICKET_TTFT, TICKET_ITL, TICKET_NO_SLO, PAGE_NO_SLO])
    assert muted == {TICKET_TTFT.fingerprint: PAGE_TTFT.fingerprint}


@pytest.mark.parametrize(
    ("kwargs", "field", "fragment"),
    [
        ({"source_matchers": ""}, "source_matchers", "at least one matcher"),
        ({"target_matchers": ()}, "target_matchers", "at least one matcher"),
        ({"source_matchers": 'a="'}, "source_matchers", "matcher 'a=\"'"),
        ({"equal": ("slo", "bad-name")}, "equal", "not a valid label name"),
        ({"equal": ("slo", "slo")}, "equal", "twice"),
        ({"name": ""}, "name", "non-empty"),
    ],
)
def test_invalid_rules_name_the_rule_and_field(kwargs, field, fragment):
    arguments = {
        "name": "mine",
        "source_matchers": 'severity="page"',
        "target_matchers": 'severity="ticket"',
        "equal": ("slo",),
        **kwargs,
    }
    with pytest.raises(InhibitRuleError) as caught:
        InhibitRule(**arguments)
    assert caught.value.field == field
    assert fragment in str(caught.value)


values = st.sampled_from(["", "page", "ticket", "x"])
label_sets = st.fixed_dictionaries(
    {"alertname": st.sampled_from(["A", "B"])},
    optional={"severity": values, "slo": values, "team": values},
)
states = st.sampled_from(["pending", "firing", "resolved"])
matcher_texts = st.sampled_from(
    ['severity="page"', 'severity="ticket"', 'slo=~".+"', 'team!="x"', 'alertname=~"A|B"', 'slo=""']
)


def _in_state(labels, state):
    alert = Alert.pending(labels, 1.0)
    if state == "pending":
        return alert
    alert = alert.fire(2.0)
    return alert if state == "firing" else alert.resolve(3.0)


@settings(max_examples=150, deadline=None)
@given(
    # one alert per label set, as in a real alert set (the fingerprint is the identity)
    st.lists(st.tuples(label_sets, states), max_size=6, unique_by=lambda spec: LabelSet(spec[0])),
    st.lists(matcher_texts, min_size=1, max_size=2),
    st.lists(matcher_texts, min_size=1, max_size=2),
    st.lists(st.sampled_from(["slo", "team", "alertname"]), max_size=2, unique=True),
)
def test_inhibition_invariants(specs, source, target, equal):
    rule = InhibitRule("r", ", ".join(source), ", ".join(target), tuple(equal))
    alerts = [_in_state(labels, state) for labels, state in specs]
    by_fingerprint = {a.fingerprint: a for a in alerts}
    for muted, inhibitor in inhibited_alerts(alerts, [rule]).items():
        source_alert = by_fingerprint[inhibitor]
        target_alert = by_fingerprint[muted]
        assert source_alert.state is AlertState.FIRING
        assert rule.is_source(source_alert) and rule.is_target(target_alert)
        assert all(
            source_alert.labels.get_value(n) == target_alert.labels.get_value(n) for n in equal
        )
        assert inhibitor != muted  # never itself
        assert not (rule.is_source(target_alert) and rule.is_target(source_alert))


def test_an_alert_set_holding_one_label_set_twice_is_refused():
    twin = Alert.pending(dict(PAGE_TTFT.labels), 100.0)  # same labels, pending
    with pytest.raises(AlertError, match="two alerts share the labels"):
        inhibited_alerts([PAGE_TTFT, TICKET_TTFT, twin])
