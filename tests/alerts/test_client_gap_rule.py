"""The client-gap rule on synthetic scrapes: it fires when a gateway's added delay steps up
while the engines' TTFT stays put, and stays silent on a constant overhead, on an engine
incident (the engines' TTFT rises with the clients'), and on a fleet with no client
timings; and the rule's fields are checked."""

from __future__ import annotations

import pytest

from alerts.errors import RuleError
from alerts.rules.builtin import BUILTIN_RULES
from alerts.rules.client_gap import ClientGapRule
from alerts.vocabulary import AlertName
from tests.alerts.eval_data import Conditions, build
from tests.alerts.test_alerts_evaluator_rules import (
    HOURS,
    PERTURB,
    RECOVER,
    evaluate,
    firing_times,
)

RULE = next(r for r in BUILTIN_RULES if r.name == AlertName.CLIENT_GAP)
_CALM = ((0.08, 1.0),)


def _behaviour(before: float | None, during: float | None, ttft_during=_CALM):
    def behaviour(t: float, replica: int) -> Conditions:
        if PERTURB < t <= RECOVER:
            return Conditions(ttft=ttft_during, gateway_delay_seconds=during)
        return Conditions(gateway_delay_seconds=before)

    return behaviour


def _fired(behaviour) -> list[float]:
    reader = build(behaviour, hours=HOURS)
    results = evaluate([RULE], reader, PERTURB - 600, RECOVER + 1500)
    return firing_times(results, alertname=RULE.alert)


def test_a_step_in_the_gateway_s_delay_fires_and_resolves():
    fired = _fired(_behaviour(0.01, 0.3))
    assert fired and PERTURB < min(fired) <= PERTURB + RULE.window_seconds + RULE.for_seconds + 30
    assert max(fired) < RECOVER + RULE.window_seconds + 30


def test_a_constant_overhead_never_fires():
    assert _fired(_behaviour(0.3, 0.3)) == []


def test_an_engine_incident_is_not_a_gap():
    # the engines' first tokens go from 80 ms to 2 s; the gateway adds its constant 10 ms
    assert _fired(_behaviour(0.01, 0.01, ttft_during=((2.0, 1.0),))) == []


def test_without_client_timings_there_is_nothing_to_evaluate():
    assert _fired(_behaviour(None, None)) == []


@pytest.mark.parametrize(
    "field, value",
    [("rise_min", 1.0), ("server_rise_max", 0.9), ("server_rise_max", 1.5), ("quantile", 1.0)],
)
def test_bad_fields_are_rule_errors(field, value):
    with pytest.raises(RuleError, match=field):
        ClientGapRule(name="g", alert="g", severity="page", **{field: value})
