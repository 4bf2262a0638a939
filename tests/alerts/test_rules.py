"""Rules as data: validation naming the rule and field, scaling, families, built-ins."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest

from alerts import AlertName, RuleError
from alerts.rules import (
    BUILTIN_RULES,
    RULE_KINDS,
    ErrorSLI,
    KVSaturationRule,
    QueueGrowthRule,
    TailLatencyRule,
    builtin_rule_set,
    metric_absent_rule,
    snap_threshold,
    with_rules,
)
from alerts.rules.types import BurnRateRule
from collectors import canonical as c
from slo import ErrorRatioIndicator, ErrorSource, LatencyMetric, load_slos
from slo.outcomes import FINISHED_REASON_OUTCOMES, Outcome, outcome

TTFT_EDGES = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0)
SLOS = load_slos(
    {
        "slos": [
            {
                "name": "chat-ttft",
                "indicator": {"latency": {"metric": "ttft", "threshold_seconds": 0.3}},
                "target": 0.99,
                "period_days": 28,
            },
            {
                "name": "avail",
                "indicator": {"errors": {"source": "requests"}},
                "target": 0.999,
                "period_days": 30,
            },
            {
                "name": "tpot",
                "indicator": {"latency": {"metric": "tpot", "threshold_seconds": 0.05}},
                "target": 0.99,
                "period_days": 30,
            },
        ]
    }
)


@pytest.mark.parametrize(
    ("threshold", "bound", "exact", "stricter"),
    [
        (0.5, 0.5, True, False),
        (0.3, 0.25, False, True),
        (1e-1, 0.1, True, False),
        (0.1 + 0.2 - 0.2, 0.1, True, False),  # arithmetic noise is still the edge
        (0.0005, 0.001, False, False),  # below the first edge: the first edge
        (1e9, 5.0, False, True),  # above every finite edge: the last one
    ],
)
def test_snap_threshold(threshold, bound, exact, stricter):
    snapped = snap_threshold(threshold, (*TTFT_EDGES, math.inf))
    assert snapped.bound_seconds == bound
    assert snapped.requested_seconds == threshold
    assert snapped.is_exact is exact
    assert snapped.is_stricter is stricter
    assert f"{bound:g}" in snapped.describe()


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, "0.5", None])
def test_snap_threshold_refuses_non_positive_or_non_numbers(bad):
    with pytest.raises(ValueError, match="threshold"):
        snap_threshold(bad, TTFT_EDGES)


def test_snap_threshold_refuses_a_layout_without_edges():
    with pytest.raises(ValueError, match="no finite positive edge"):
        snap_threshold(0.5, (math.inf,))


@pytest.mark.parametrize("shedding", [True, False])
@pytest.mark.parametrize("aborts", [True, False])
def test_error_sli_reason_sets_agree_with_slo_outcomes(shedding, aborts):
    indicator = ErrorRatioIndicator(ErrorSource.REQUESTS, shedding, aborts)
    sli = ErrorSLI(indicator)
    counted = {Outcome.LOAD_SHED: shedding, Outcome.ABORTED: aborts, Outcome.ERROR: True}
    for value, kind in FINISHED_REASON_OUTCOMES.items():
        assert (value in sli.bad_reasons()) is counted.get(kind, False)
        assert (value in sli.valid_reasons()) is (kind is Outcome.GOOD or counted.get(kind, False))


@pytest.mark.parametrize("shedding", [True, False])
@pytest.mark.parametrize("aborts", [True, False])
def test_error_sli_code_patterns_agree_with_slo_outcomes(shedding, aborts):
    import re2

    indicator = ErrorRatioIndicator(ErrorSource.HTTP_RESPONSES, shedding, aborts)
    patterns = ErrorSLI(indicator).code_patterns()
    counted = {Outcome.LOAD_SHED: shedding, Outcome.ABORTED: aborts, Outcome.ERROR: True}
    for code in [*(str(n) for n in range(100, 600)), "99", "600", "", "abc", "2000"]:
        kind = outcome(code, ErrorSource.HTTP_RESPONSES)
        is_valid = bool(re2.fullmatch(patterns.valid, code)) and not (
            patterns.left_out and re2.fullmatch(patterns.left_out, code)
        )
        assert bool(re2.fullmatch(patterns.bad, code)) is counted.get(kind, False), code
        assert is_valid is (kind is Outcome.GOOD or counted.get(kind, False)), code


def test_builtin_rules_use_the_vocabulary_and_read_canonical_families():
    rule_set, notes = builtin_rule_set(SLOS)
    names = {r.alert for r in rule_set}
    assert names == {a.value for a in AlertName}
    known = set(c.FAMILIES) | set(c.GPU_FAMILIES)
    for rule in rule_set:
        assert set(rule.families()) <= known, rule.name
        assert rule.summary and rule.description and rule.runbook, rule.name
        assert rule.alert_labels()["severity"] in ("page", "ticket")
    assert notes == ("SLO 'tpot': no burn-rate rule: tpot has no histogram (request records only)",)


def test_burn_rate_rules_take_the_workbook_rows_of_the_period():
    rule_set, _ = builtin_rule_set(SLOS)
    page = rule_set.get("slo-burn-rate:chat-ttft:page")
    ticket = rule_set.get("slo-burn-rate:avail:ticket")
    assert isinstance(page, BurnRateRule) and isinstance(ticket, BurnRateRule)
    assert [w.burn_rate_factor for w in page.windows] == [13.44, 5.6]
    assert [w.burn_rate_factor for w in ticket.windows] == [3.0, 1.0]
    assert page.window_lengths_seconds() == (300.0, 1800.0, 3600.0, 21600.0)
    assert page.alert_labels() == {"severity": "page", "slo": "chat-ttft"}
    assert ticket.sli == ErrorSLI(ErrorRatioIndicator(ErrorSource.REQUESTS))


def test_scaled_scales_every_window_and_for_and_keeps_burn_factors():
    rule_set, _ = builtin_rule_set(SLOS)
    scaled = rule_set.scaled(0.01)
    for before, after in zip(rule_set, scaled, strict=True):
        for f in fields(before):
            if f.name.endswith("window_seconds") or f.name in ("for_seconds",):
                assert getattr(after, f.name) == pytest.approx(getattr(before, f.name) * 0.01)
    page = scaled.get("slo-burn-rate:chat-ttft:page")
    assert isinstance(page, BurnRateRule)
    assert page.window_lengths_seconds() == pytest.approx((3.0, 18.0, 36.0, 216.0))
    assert [w.burn_rate_factor for w in page.windows] == pytest.approx([13.44, 5.6])
    with pytest.raises(RuleError, match="field 'scale'"):
        rule_set.rules[0].scaled(0)


def test_metric_absent_checks_every_engine_family_but_not_gpu():
    absent = metric_absent_rule(BUILTIN_RULES)
    assert c.REQUESTS_WAITING in absent.checked_families
    assert c.GPU_ECC_ERRORS_TOTAL not in absent.checked_families
    assert absent.families() == absent.checked_families


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: QueueGrowthRule(name="q", alert="q", for_seconds=-1), "for"),
        (
            lambda: QueueGrowthRule(name="q", alert="q", keep_firing_for_seconds=math.nan),
            "keep_firing_for",
        ),
        (lambda: QueueGrowthRule(name="q", alert="q", window_seconds=0), "window_seconds"),
        (lambda: QueueGrowthRule(name="q", alert="q", queue_share_min=2), "queue_share_min"),
        (lambda: QueueGrowthRule(name="q", alert="q", severity="urgent"), "severity"),
        (lambda: QueueGrowthRule(name="q", alert="q", labels={"severity": "x"}), "labels.severity"),
        (lambda: QueueGrowthRule(name="q", alert="q", labels={"bad-name": "x"}), "labels"),
        (lambda: QueueGrowthRule(name="-q", alert="q"), "name"),
        (lambda: KVSaturationRule(name="k", alert="k", usage_min=math.inf), "usage_min"),
        (
            lambda: TailLatencyRule(
                name="t",
                alert="t",
                metric=LatencyMetric.TPOT,
                threshold_seconds=1,
                median_max_seconds=1,
            ),
            "metric",
        ),
        (
            lambda: TailLatencyRule(
                name="t",
                alert="t",
                metric=LatencyMetric.TTFT,
                threshold_seconds=1,
                median_max_seconds=1,
                quantile=0.3,
            ),
            "quantile",
        ),
    ],
)
def test_invalid_rules_name_the_rule_and_field(build, field):
    with pytest.raises(RuleError) as caught:
        build()
    assert caught.value.field == field
    assert f"field {field!r}" in str(caught.value)


def test_with_rules_replaces_by_name_and_rebuilds_metric_absent():
    rule_set, _ = builtin_rule_set()
    kept = [r for r in rule_set if r.name != "kv-saturation"]
    smaller = with_rules(type(rule_set)(tuple(kept)), [])
    absent = smaller.get("metric-absent")
    assert c.KV_CACHE_USAGE not in absent.families()
    louder = with_rules(rule_set, [QueueGrowthRule(name="queue-growth", alert="queue-growth")])
    assert louder.names() == rule_set.names()


def test_every_kind_is_registered_once():
    assert sorted(RULE_KINDS) == sorted(k.kind for k in RULE_KINDS.values())
    assert len(RULE_KINDS) == 12


def test_latency_sli_error_ratio_snaps_to_the_windows_layout():
    from alerts.rules import LatencySLI
    from slo import ClassicHistogram

    window = ClassicHistogram((0.1, 0.25, 0.5, math.inf), (10.0, 60.0, 90.0, 100.0))
    ratio, snapped = LatencySLI(LatencyMetric.TTFT, 0.3).error_ratio(window)
    assert snapped.bound_seconds == 0.25 and ratio == 1 - 60 / 100
    assert LatencySLI(LatencyMetric.TTFT, 0.5).error_ratio(window)[0] == pytest.approx(0.1)
    empty = ClassicHistogram((0.1, math.inf), (0.0, 0.0))
    assert math.isnan(LatencySLI(LatencyMetric.TTFT, 0.1).error_ratio(empty)[0])


def test_error_sli_error_ratio_is_slo_outcomes():
    sli = ErrorSLI(ErrorRatioIndicator(ErrorSource.REQUESTS, count_load_shedding=False))
    assert sli.error_ratio({"stop": 90.0, "error": 10.0, "rejected": 50.0, "abort": 3}) == 0.1
    assert math.isnan(sli.error_ratio({"abort": 3.0}))


def test_burn_rate_rule_evaluates_its_rows_like_slo_budget():
    rule_set, _ = builtin_rule_set(SLOS)
    page = rule_set.get("slo-burn-rate:chat-ttft:page")
    windows = page.window_lengths_seconds()
    hot = {w: 0.2 for w in windows}  # 20x a 1 % budget: above 13.44 and 5.6
    assert [c.is_firing for c in page.evaluate(hot)] == [True, True]
    cool = {w: 0.1 for w in windows}  # 10x: only the 6 h row (5.6) fires
    assert [c.is_firing for c in page.evaluate(cool)] == [False, True]
    assert not any(c.is_firing for c in page.evaluate({w: math.nan for w in windows}))
    scaled = page.scaled(0.01)
    assert [
        c.is_firing for c in scaled.evaluate({w: 0.1 for w in scaled.window_lengths_seconds()})
    ] == [False, True]


def test_every_scenario_expects_an_alert_a_builtin_rule_raises():
    """loadgen's scenarios name the alert they must produce: each is a built-in's alert."""
    from pathlib import Path

    import yaml

    alerts = {r.alert for r in builtin_rule_set(SLOS)[0]}
    folder = Path(__file__).parents[2] / "loadgen" / "scenarios"
    scenarios = sorted(folder.glob("*.yaml"))
    assert scenarios
    for path in scenarios:
        expected = yaml.safe_load(path.read_text(encoding="utf-8"))["expects"]["alert"]
        assert expected in alerts, (path.name, expected)


def test_a_tail_rise_well_inside_its_slo_tickets_and_above_half_of_it_pages():
    from alerts.rules import INSIDE_SLO_SUFFIX, builtin_rule_set
    from slo import load_slos

    slos = load_slos(
        {
            "slos": [
                {
                    "name": name,
                    "indicator": {"latency": {"metric": "itl", "threshold_seconds": t}},
                    "target": 0.99,
                    "period_days": 28,
                }
                for name, t in (("itl-loose", 0.4), ("itl", 0.1))
            ]
        }
    )
    rules, _ = builtin_rule_set(slos)
    page = rules.get("tail-latency-itl")
    ticket = rules.get("tail-latency-itl" + INSIDE_SLO_SUFFIX)
    assert (page.severity, page.threshold_seconds, page.tail_max_seconds) == ("page", 0.05, None)
    assert (ticket.severity, ticket.threshold_seconds, ticket.tail_max_seconds) == (
        "ticket",
        None,
        0.05,
    )
    # a ticket rule and a TTFT rule without an SLO are left as they are
    assert rules.get("tail-latency-ttft" + INSIDE_SLO_SUFFIX) is None
    assert rules.get("tail-latency-ttft").threshold_seconds is None
    assert builtin_rule_set()[0].get("tail-latency-itl" + INSIDE_SLO_SUFFIX) is None
