"""Inhibition with Alertmanager's semantics (inhibit/inhibit.go) and the built-in rule."""

from __future__ import annotations

import pytest

from alerts import (
    DEFAULT_INHIBIT_RULES,
    Alert,
    InhibitRule,
    InhibitRuleError,
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
