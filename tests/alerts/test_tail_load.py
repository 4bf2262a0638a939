"""A tail rule weighs its rise against the load (``load``): the ITL page holds only for a rise
beyond what the load's own rise explains, and its ticket twin for the rise the load explains;
read from the rule's own histogram (observations over the window against the baseline
windows' median), configured, checked when built and exported."""

from __future__ import annotations

from dataclasses import replace

import pytest

from alerts import RuleError, evaluate_rule
from alerts.export.exprs import tail_latency
from alerts.export.names import EngineNames
from alerts.rules import WITH_LOAD_SUFFIX, builtin_rule_set
from alerts.rules.config import load_alerts
from alerts.rules.types import TailLatencyRule
from collectors.dialect_rules import Dialect
from slo import LatencyMetric
from tests.alerts.eval_data import START, Conditions, build

PERTURB = START + 3900.0  # after an hour: the baseline needs one
#: one token gap in fifty takes 0.1 s: the p99 rises well past 1.5x, the median holds
SLOW_TAIL = ((0.02, 0.98), (0.1, 0.02))


def _rule(load: str | None) -> TailLatencyRule:
    return TailLatencyRule(
        name="itl", alert="itl", metric=LatencyMetric.ITL, rise_min=1.5, load=load
    )


def _reader(requests: int, itl=SLOW_TAIL):
    def behaviour(t: float, replica: int) -> Conditions:
        if t > PERTURB:
            return Conditions(requests=requests, itl=itl)
        return Conditions()

    return build(behaviour, hours=(PERTURB + 900 - START) / 3600)


def _holds(rule: TailLatencyRule, reader) -> bool:
    (instance,) = evaluate_rule(rule, reader, PERTURB + 300)
    return instance.holds


def _tail_rise(reader) -> float:
    (before,) = evaluate_rule(_rule(None), reader, PERTURB)
    (after,) = evaluate_rule(_rule(None), reader, PERTURB + 300)
    return after.value / before.value


def test_the_same_tail_pages_at_the_same_load_and_tickets_when_the_load_explains_it():
    steady, busier = _reader(requests=100), _reader(requests=800)
    # NOTE: the same mix, so the same tail; eight times the token gaps explain up to 12x
    rise = _tail_rise(steady)
    assert 1.5 < rise < 1.5 * 8 and _tail_rise(busier) == pytest.approx(rise)
    assert _holds(_rule(None), steady) and _holds(_rule(None), busier)
    assert _holds(_rule("beyond"), steady) and not _holds(_rule("within"), steady)
    assert not _holds(_rule("beyond"), busier) and _holds(_rule("within"), busier)


def test_a_fleet_that_serves_less_is_held_to_its_usual_tail_not_to_less():
    # NOTE: half the load (clamp at 1): the rise still pages, as it would with no load test
    quieter = _reader(requests=50)
    assert _holds(_rule("beyond"), quieter) and not _holds(_rule("within"), quieter)


def test_no_rise_holds_for_neither_whatever_the_load():
    busier = _reader(requests=800, itl=((0.02, 1.0),))
    assert not _holds(_rule("beyond"), busier) and not _holds(_rule("within"), busier)


def test_the_builtin_itl_page_has_a_ticket_twin_for_the_rise_the_load_explains():
    rules, _ = builtin_rule_set()
    page = rules.get("tail-latency-itl")
    twin = rules.get("tail-latency-itl" + WITH_LOAD_SUFFIX)
    assert (page.severity, page.load) == ("page", "beyond")
    assert (twin.severity, twin.load, twin.alert) == ("ticket", "within", page.alert)
    assert "load's rise" in page.template_values()["condition"]
    assert "within what the load's rise explains" in twin.template_values()["condition"]


@pytest.mark.parametrize("load", ["sideways", "", 1.5, True, ["beyond"]])
def test_a_load_that_is_not_beyond_or_within_is_refused_with_the_field_named(load):
    with pytest.raises(RuleError, match=r"rule 'itl', field 'load': must be one of"):
        _rule(load)


def test_load_needs_the_comparison_with_the_past():
    with pytest.raises(RuleError, match=r"field 'load': .*needs rise_min"):
        replace(_rule("beyond"), rise_min=None, threshold_seconds=0.1)


def test_overriding_rise_min_off_drops_the_builtin_load_unless_load_is_set():
    fixed = {"rise_min": None, "median_rise_max": None, "threshold_seconds": 0.1}
    rules = load_alerts({"rules": {"tail-latency-itl": fixed}}).rules
    assert rules.get("tail-latency-itl").load is None
    with pytest.raises(RuleError, match=r"field 'load': .*needs rise_min"):
        load_alerts({"rules": {"tail-latency-itl": {**fixed, "load": "beyond"}}})


def test_the_export_scales_the_baseline_by_the_observations_rise_at_least_one():
    (rule,) = [r for r in builtin_rule_set()[0].rules if r.name == "tail-latency-itl"]
    *records, alert = tail_latency(rule, EngineNames(Dialect.VLLM))
    assert [r.record.rsplit(":", 1)[-1] for r in records] == [
        "p99_rate5m",
        "p50_rate5m",
        "observations_rate5m",
    ]
    assert "rate(vllm:inter_token_latency_seconds_count[5m])" in records[2].expr
    assert f"clamp_min({records[2].record} / quantile_over_time(0.5, {records[2].record}[1h:1m] offset 5m), 1)" in alert.expr  # fmt: skip
    twin = replace(rule, load="within")
    assert f"{records[0].record} <= 1.5" in tail_latency(twin, EngineNames(Dialect.VLLM))[-1].expr
