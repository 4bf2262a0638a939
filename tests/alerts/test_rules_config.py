"""The ``alerts:`` section of tailwatch.yaml: overrides, new rules, notifiers, and errors that
name the rule and the field; fuzzed so bad input is a ConfigError, never a traceback."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alerts.rules import QueueGrowthRule, TailLatencyRule, parse_duration
from collectors.config import ConfigError
from tailwatch.config import parse_config

SLOS = [
    {
        "name": "chat-ttft",
        "indicator": {"latency": {"metric": "ttft", "threshold_seconds": 0.5}},
        "target": 0.99,
        "period_days": 28,
    }
]


def alerts_of(section, slos=()):
    return parse_config({"slos": list(slos), "alerts": section}).alerts


def test_no_section_gives_the_builtins_and_the_slo_rules():
    config = parse_config({"slos": SLOS})
    names = config.alerts.rules.names()
    assert "slo-burn-rate:chat-ttft:page" in names and "queue-growth" in names
    assert config.alerts.notifiers == ()


def test_overrides_disables_additions_and_scale():
    config = alerts_of(
        {
            "window_scale": 0.5,
            "rules": {
                "queue-growth": {"for": "1m30s", "waiting_min": 16, "labels": {"team": "infer"}},
                "gpu-health": {"enabled": False},
                "slo-burn-rate": {"runbook": "https://wiki/slo"},
                "e2e-tail": {
                    "kind": "tail-latency",
                    "metric": "e2e",
                    "threshold_seconds": 30,
                    "median_max_seconds": 5,
                    "window_seconds": "10m",
                },
            },
            "notifiers": [
                {"webhook": "http://127.0.0.1:9000/hook"},
                {"alertmanager": "http://127.0.0.1:9093", "timeout_seconds": 5},
            ],
        },
        SLOS,
    )
    rules = config.rules
    queue = rules.get("queue-growth")
    assert isinstance(queue, QueueGrowthRule)
    assert queue.for_seconds == 45.0 and queue.window_seconds == 150.0  # scaled by 0.5
    assert queue.waiting_min == 16 and dict(queue.labels) == {"team": "infer"}
    assert rules.get("gpu-health") is None
    assert rules.get("slo-burn-rate:chat-ttft:page").runbook == "https://wiki/slo"
    assert rules.get("slo-burn-rate:chat-ttft:ticket").runbook == "https://wiki/slo"
    tail = rules.get("e2e-tail")
    assert isinstance(tail, TailLatencyRule) and tail.alert == "e2e-tail"
    assert tail.window_seconds == 300.0
    assert "e2e_seconds" in rules.get("metric-absent").families()
    assert [(n.kind, n.timeout_seconds) for n in config.notifiers] == [
        ("webhook", 10.0),
        ("alertmanager", 5),
    ]


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"rules": {"queue-growth": {"for": "soon"}}}, "rule 'queue-growth', field 'for': "),
        ({"rules": {"queue-growth": {"for": -1}}}, "rule 'queue-growth', field 'for': "),
        ({"rules": {"queue-growth": {"fr": 1}}}, "field 'fr': unknown field; allowed: alert, "),
        ({"rules": {"queue-growth": {"kind": "kv-saturation"}}}, "field 'kind': "),
        ({"rules": {"queue-growth": {"enabled": "no"}}}, "field 'enabled': "),
        ({"rules": {"queue-growth": 3}}, "rule 'queue-growth', field 'rule'"),
        ({"rules": {"new": {"metric": "ttft"}}}, "rule 'new', field 'kind': "),
        ({"rules": {"new": {"kind": "tail-latency"}}}, "rule 'new', field 'metric': required"),
        ({"rules": {"kv-saturation": {"usage_min": math.nan}}}, "field 'usage_min': "),
        ({"rules": {"error-rate": {"source": "logs"}}}, "rule 'error-rate', field 'source': "),
        ({"rules": {"tail-latency-ttft": {"metric": "tpot"}}}, "field 'metric': "),
        ({"rules": {"gpu-health": {"throttle_reasons": ["hot"]}}}, "field 'throttle_reasons'"),
        ({"rules": {"slo-burn-rate": {"windows": []}}}, "field 'windows': unknown field"),
        ({"window_scale": 0}, "field 'window_scale'"),
        ({"notifiers": [{"webhook": "ftp://x"}]}, "notifiers[0].webhook: "),
        ({"notifiers": [{"pager": "http://x"}]}, "notifiers[0].pager: unknown key"),
        ({"notifiers": [{}]}, "notifiers[0]: needs exactly one of"),
        (
            {"silences": []},
            "silences: unknown key (known: window_scale, evaluation_interval, in_collector, "
            "rules, notifiers)",
        ),
        ({"evaluation_interval": "0s"}, "evaluation_interval: must be above 0 s, got 0"),
        ({"evaluation_interval": -1}, "evaluation_interval: must be 0 s to ten years"),
        ({"evaluation_interval": "soon"}, "evaluation_interval: must be seconds or a duration"),
        ({"in_collector": "yes"}, "in_collector: must be true or false, got 'yes'"),
    ],
)
def test_errors_name_the_rule_and_field(section, message):
    with pytest.raises(ConfigError) as caught:
        alerts_of(section, SLOS)
    assert str(caught.value).startswith("alerts: ")
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("5m", 300), ("1h30m", 5400), ("250ms", 0.25), (12, 12)]
)
def test_durations(text, seconds):
    assert parse_duration("r", "for", text) == seconds


EXTREMES = [math.nan, math.inf, -math.inf, -1, 0, 1e308, 10**400, -(10**400), True, "1", None]
STRING_FIELDS = ["alert", "severity", "summary", "description", "runbook", "metric", "source"]


@settings(max_examples=60, deadline=None)
@given(
    target=st.sampled_from(
        [
            "queue-growth",
            "kv-saturation",
            "prefix-hit-drop",
            "replica-imbalance",
            "error-rate",
            "tail-latency-ttft",
            "gpu-health",
            "target-down",
            "metric-absent",
            "slo-burn-rate",
        ]
    ),
    key=st.sampled_from(
        [
            "for",
            "keep_firing_for",
            "window_seconds",
            "baseline_window_seconds",
            "waiting_min",
            "growth_min",
            "queue_share_min",
            "usage_min",
            "preemptions_per_second_min",
            "ratio_max",
            "baseline_hit_rate_min",
            "ratio_min",
            "excess_min",
            "replicas_min",
            "quantile",
            "threshold_seconds",
            "median_max_seconds",
        ]
    ),
    value=st.sampled_from(EXTREMES) | st.floats() | st.integers(),
)
def test_numeric_fields_at_their_extremes_load_or_name_the_field(target, key, value):
    try:
        alerts_of({"rules": {target: {key: value}}}, SLOS)
    except ConfigError as error:
        assert f"rule '{target}', field '{key}'" in str(error)


@settings(max_examples=80, deadline=None)
@given(
    target=st.sampled_from(["queue-growth", "error-rate", "tail-latency-ttft", "slo-burn-rate"]),
    key=st.sampled_from(STRING_FIELDS),
    value=st.text(max_size=30) | st.sampled_from(["page", "ticket", "ttft", "requests", ""]),
)
def test_string_fields_with_any_text_load_or_name_the_field(target, key, value):
    try:
        alerts_of({"rules": {target: {key: value}}}, SLOS)
    except ConfigError as error:
        assert f"rule '{target}', field " in str(error)


@settings(max_examples=60, deadline=None)
@given(
    name=st.text(max_size=20),
    label=st.text(max_size=10),
    value=st.text(max_size=10) | st.integers() | st.none(),
    url=st.text(max_size=30),
)
def test_names_labels_and_urls_with_any_text_are_config_errors_or_load(name, label, value, url):
    for section in (
        {"rules": {name: {"kind": "target-down"}}},
        {"rules": {"queue-growth": {"labels": {label: value}}}},
        {"notifiers": [{"webhook": url}]},
    ):
        try:
            alerts_of(section)
        except ConfigError as error:
            assert str(error).startswith("alerts: ")


def test_the_burn_rate_group_key_is_valid_without_slos():
    rules = alerts_of({"rules": {"slo-burn-rate": {"for": "1m"}}}).rules
    assert not any(r.name.startswith("slo-burn-rate") for r in rules)
    with pytest.raises(ConfigError, match="rule 'slo-burn-rate', field 'for'"):
        alerts_of({"rules": {"slo-burn-rate": {"for": "soon"}}})


def _numeric_fields_of_each_builtin():
    from dataclasses import fields as dataclass_fields

    from alerts.rules import BUILTIN_RULES
    from alerts.rules.types import config_key

    for rule in BUILTIN_RULES:
        for f in dataclass_fields(rule):
            value = getattr(rule, f.name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                yield rule.name, config_key(f.name)


@pytest.mark.parametrize(("target", "key"), list(_numeric_fields_of_each_builtin()))
@pytest.mark.parametrize("value", EXTREMES, ids=repr)
def test_every_numeric_field_of_every_builtin_at_each_extreme(target, key, value):
    """Each built-in rule's own numeric fields: an extreme loads or names that rule and field."""
    try:
        rules = alerts_of({"rules": {target: {key: value}}}, SLOS).rules
    except ConfigError as error:
        assert f"rule '{target}', field '{key}'" in str(error)
        return
    assert rules.get(target) is not None  # accepted: then the rule is still there


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["queue-growth", "tail-latency", "5m", "for", "kind", "rules", "webhook"])
)
_YAMLISH = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "rules",
                    "notifiers",
                    "window_scale",
                    "kind",
                    "for",
                    "enabled",
                    "labels",
                    "queue-growth",
                    "e2e-tail",
                    "metric",
                    "webhook",
                    "alertmanager",
                    "source",
                    "x",
                ]
            )
            | st.text(max_size=8),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(section=_YAMLISH)
def test_any_yaml_shaped_section_is_a_config_or_one_config_error(section):
    for placed in (
        section,
        {"rules": section},
        {"rules": {"queue-growth": section}},  # a built-in's fields
        {"rules": {"e2e-tail": section}},  # a new rule's fields
        {"rules": {"slo-burn-rate": section}},
        {"notifiers": [section]},
    ):
        try:
            alerts_of(placed, SLOS)
        except ConfigError as error:
            assert str(error).startswith("alerts: ")


def test_annotations_follow_overrides_and_scaling():
    rules = alerts_of(
        {"window_scale": 0.01, "rules": {"queue-growth": {"waiting_min": 16}}}, SLOS
    ).rules
    text = rules.get("queue-growth").annotations()["description"]
    assert text.startswith(
        "Over 3s: queueing is at least 50% of TTFT, the mean queue time is above 2x its 36s "
        "baseline, at least 1 wait per replica, at least 16 requests wait. "
    )
    burn = rules.get("slo-burn-rate:chat-ttft:page").annotations()["description"]
    assert burn == (
        "SLO chat-ttft (target 0.99, budget 1 % over 0.28 d): 2% of the budget within 36s; "
        "5% of the budget within 3m36s"
    )


@pytest.mark.parametrize(
    ("summary", "expected"),
    [
        ("queueing over {rise_min:g}x for {for:g}", None),  # `for` is not a field name
        ("{nope}", None),
        ("unclosed {rise_min", None),
        ("over {waiting_min:g}", None),  # a line this rule does not set
        ("literal {{braces}} and {rise_min:g}", "literal {braces} and 2"),
    ],
)
def test_annotation_placeholders_name_fields_or_are_refused(summary, expected):
    if expected is None:
        with pytest.raises(ConfigError, match="rule 'queue-growth', field 'summary': "):
            alerts_of({"rules": {"queue-growth": {"summary": summary}}})
    else:
        rules = alerts_of({"rules": {"queue-growth": {"summary": summary}}}).rules
        assert rules.get("queue-growth").annotations()["summary"] == expected


def test_group_and_specific_burn_rate_overrides_both_apply():
    rules = alerts_of(
        {
            "rules": {
                "slo-burn-rate": {"runbook": "https://wiki/slo"},
                "slo-burn-rate:chat-ttft:page": {"for": "2m"},
            }
        },
        SLOS,
    ).rules
    page = rules.get("slo-burn-rate:chat-ttft:page")
    assert (page.runbook, page.for_seconds) == ("https://wiki/slo", 120.0)
    assert rules.get("slo-burn-rate:chat-ttft:ticket").for_seconds == 0


def test_evaluation_interval_and_in_collector_default_and_parse():
    config = alerts_of(None, SLOS)
    assert (config.evaluation_interval_seconds, config.in_collector) == (15.0, False)
    config = alerts_of({"evaluation_interval": "1m30s", "in_collector": True}, SLOS)
    assert (config.evaluation_interval_seconds, config.in_collector) == (90.0, True)
