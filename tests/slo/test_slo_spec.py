"""The SLO model: parsing the ``slos:`` section into specs whose indicator is exactly one kind,
the older ``objectives:`` spelling, reading it from tailwatch.yaml, and validation errors that
name the SLO and the field."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import slo
from collectors.config import ConfigError
from slo import (
    ErrorRatioIndicator,
    ErrorSource,
    LatencyIndicator,
    LatencyMetric,
    Objectives,
    Selector,
    SLOSpec,
    load_slos,
)
from tailwatch.config import load_config, parse_config

SETTINGS = settings(max_examples=60, deadline=None)
LATENCY = {"latency": {"metric": "ttft", "threshold_seconds": 0.5}}
VALID = {
    "name": "chat-latency",
    "selector": {"model": "llama-3-8b", "tenant": "acme", "route": "/v1/chat/completions"},
    "indicator": LATENCY,
    "target": 0.99,
    "period_days": 28,
}
AVAILABILITY = {
    "name": "chat-availability",
    "indicator": {"errors": {"source": "http_responses", "count_load_shedding": False}},
    "target": 0.999,
    "period_days": 30,
}


def with_changes(**changes) -> dict:
    item = dict(VALID) | changes
    return {key: value for key, value in item.items() if value is not ...}


def only(item: dict) -> SLOSpec:
    (spec,) = load_slos({"slos": [item]})
    return spec


def test_loads_a_latency_spec() -> None:
    (spec,) = load_slos({"slos": [VALID], "engine": {"ignored": True}})
    assert spec == SLOSpec(
        name="chat-latency",
        selector=Selector("llama-3-8b", "acme", "/v1/chat/completions"),
        indicator=LatencyIndicator(LatencyMetric.TTFT, 0.5),
        target=0.99,
        period_days=28,
    )
    assert spec.error_budget == pytest.approx(0.01)
    assert spec.period_seconds == 28 * 86400
    assert spec.indicator.objectives == Objectives(ttft_seconds=0.5)


@pytest.mark.parametrize("metric", ["ttft", "tpot", "itl", "e2e"])
def test_every_latency_metric_maps_to_its_goodput_objective(metric: str) -> None:
    spec = only(with_changes(indicator={"latency": {"metric": metric, "threshold_seconds": 2}}))
    assert spec.indicator == LatencyIndicator(LatencyMetric(metric), 2.0)
    assert list(spec.indicator.objectives.given()) == [(f"{metric}_seconds", 2.0)]


@pytest.mark.parametrize(
    ("errors", "expected"),
    [
        ({"source": "requests"}, ErrorRatioIndicator(ErrorSource.REQUESTS)),
        (
            {"source": "http_responses", "count_load_shedding": False, "count_aborts": True},
            ErrorRatioIndicator(ErrorSource.HTTP_RESPONSES, False, True),
        ),
    ],
)
def test_loads_an_error_ratio_spec(errors: dict, expected: ErrorRatioIndicator) -> None:
    spec = only(AVAILABILITY | {"indicator": {"errors": errors}})
    assert spec.indicator == expected
    assert spec.selector == Selector()
    # defaults: shedding counts against availability, aborts do not
    assert ErrorRatioIndicator(ErrorSource.REQUESTS).count_load_shedding is True
    assert ErrorRatioIndicator(ErrorSource.REQUESTS).count_aborts is False


def test_the_older_one_threshold_objectives_still_reads_as_a_latency_indicator() -> None:
    old = with_changes(indicator=..., objectives={"e2e_seconds": 30})
    assert only(old).indicator == LatencyIndicator(LatencyMetric.E2E, 30.0)


def test_several_objectives_are_refused_with_the_rewrite() -> None:
    old = with_changes(indicator=..., objectives={"ttft_seconds": 0.5, "tpot_seconds": 0.05})
    with pytest.raises(slo.SLOSpecError) as caught:
        only(old)
    assert (caught.value.slo_name, caught.value.field) == ("chat-latency", "objectives")
    message = str(caught.value)
    assert "one SLO per threshold" in message
    assert "indicator: {latency: {metric: ttft, threshold_seconds: 0.5}}" in message
    assert "indicator: {latency: {metric: tpot, threshold_seconds: 0.05}}" in message


def test_no_section_means_no_slos() -> None:
    assert load_slos({}) == ()
    assert load_slos({"slos": None}) == ()


def test_selector_fields_are_optional_and_match() -> None:
    spec = only(with_changes(selector=...))
    assert spec.selector == Selector()
    assert spec.selector.matches("any", None, "/x")
    assert Selector(model="m").matches("m", "t", "/r")
    assert not Selector(model="m", tenant="t").matches("m", "u", "/r")


def test_loads_from_tailwatch_yaml(tmp_path: Path) -> None:
    path = tmp_path / "tailwatch.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            collector:
              scrape_interval_seconds: 5
            slos:
              - name: batch-e2e
                indicator: {latency: {metric: e2e, threshold_seconds: 30}}
                target: 0.995
                period_days: 30
              - name: availability
                indicator:
                  errors: {source: requests, count_aborts: true}
                target: 0.999
                period_days: 28
            """
        )
    )
    latency, availability = load_config(path).slos
    assert latency.indicator == LatencyIndicator(LatencyMetric.E2E, 30.0)
    assert latency.period_days == 30
    assert availability.indicator == ErrorRatioIndicator(ErrorSource.REQUESTS, count_aborts=True)


def test_a_file_without_slos_has_none_and_a_bad_one_is_a_config_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_config(empty).slos == ()
    broken = tmp_path / "broken.yaml"
    broken.write_text("slos: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(broken)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("slos:\n  - {name: x, indicator: {latency: {metric: ttft}}, target: 0.9}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(wrong)
    assert str(caught.value).startswith(
        "slos: SLO 'x', field 'indicator.latency.threshold_seconds': must be a positive number"
    )
    assert isinstance(caught.value.__cause__, slo.SLOSpecError)
    assert caught.value.__cause__.field == "indicator.latency.threshold_seconds"


@pytest.mark.parametrize(
    ("item", "slo_name", "field", "hint"),
    [
        (with_changes(name=""), "slos[0]", "name", "got ''"),
        (with_changes(name=...), "slos[0]", "name", "got None"),
        (with_changes(name="-x"), "slos[0]", "name", "got '-x'"),
        (with_changes(target=99), "chat-latency", "target", "write 0.99 for 99 %"),
        (with_changes(target=99.9), "chat-latency", "target", "write 0.999 for 99.9 %"),
        (with_changes(target=1.0), "chat-latency", "target", "fraction in (0, 1)"),
        (with_changes(target=1), "chat-latency", "target", "got 1"),
        (with_changes(target=0), "chat-latency", "target", "got 0"),
        (with_changes(target=-0.5), "chat-latency", "target", "got -0.5"),
        (with_changes(target=math.nan), "chat-latency", "target", "got nan"),
        (with_changes(target=math.inf), "chat-latency", "target", "got inf"),
        (with_changes(target=True), "chat-latency", "target", "got True"),
        (with_changes(target="0.99"), "chat-latency", "target", "got '0.99'"),
        (with_changes(target=...), "chat-latency", "target", "got None"),
        (with_changes(period_days=7), "chat-latency", "period_days", "[28, 30]"),
        (with_changes(period_days=True), "chat-latency", "period_days", "got True"),
        (with_changes(period_days="30"), "chat-latency", "period_days", "got '30'"),
        (with_changes(description=3), "chat-latency", "description", "must be a string"),
        (with_changes(indicator=...), "chat-latency", "indicator", "exactly one kind"),
        (with_changes(indicator={}), "chat-latency", "indicator", "got []"),
        (
            with_changes(indicator=LATENCY | {"errors": {"source": "requests"}}),
            "chat-latency",
            "indicator",
            "got ['errors', 'latency']",
        ),
        (with_changes(indicator="latency"), "chat-latency", "indicator", "got 'latency'"),
        (
            with_changes(indicator={"availability": {}}),
            "chat-latency",
            "indicator.availability",
            "unknown indicator kind",
        ),
        (
            with_changes(indicator={"latency": None}),
            "chat-latency",
            "indicator.latency",
            "must be a mapping",
        ),
        (
            with_changes(indicator={"latency": {"metric": "ttft_seconds", "threshold_seconds": 1}}),
            "chat-latency",
            "indicator.latency.metric",
            "write metric: ttft",
        ),
        (
            with_changes(indicator={"latency": {"metric": "TTFT", "threshold_seconds": 1}}),
            "chat-latency",
            "indicator.latency.metric",
            "got 'TTFT'",
        ),
        (
            with_changes(indicator={"latency": {"metric": "ttft", "threshold_seconds": -1}}),
            "chat-latency",
            "indicator.latency.threshold_seconds",
            "positive number of seconds, got -1",
        ),
        (
            with_changes(indicator={"latency": {"metric": "ttft", "threshold_ms": 500}}),
            "chat-latency",
            "indicator.latency.threshold_ms",
            "unknown field",
        ),
        (
            with_changes(indicator={"errors": {}}),
            "chat-latency",
            "indicator.errors.source",
            "http_responses counts responses by status code",
        ),
        (
            with_changes(indicator={"errors": None}),
            "chat-latency",
            "indicator.errors",
            "must be a mapping",
        ),
        (
            with_changes(indicator={"errors": {"source": "requests", "count_aborts": "yes"}}),
            "chat-latency",
            "indicator.errors.count_aborts",
            "true or false, got 'yes'",
        ),
        (
            with_changes(indicator={"errors": {"source": "requests", "codes": [500]}}),
            "chat-latency",
            "indicator.errors.codes",
            "unknown field",
        ),
        (
            with_changes(objectives={"ttft_seconds": 1}),
            "chat-latency",
            "objectives",
            "not both",
        ),
        (
            with_changes(indicator=..., objectives={}),
            "chat-latency",
            "objectives",
            "must map one of",
        ),
        (
            with_changes(indicator=..., objectives={"ttft": 500}),
            "chat-latency",
            "objectives.ttft",
            "ttft_seconds: 0.5",
        ),
        (
            with_changes(indicator=..., objectives={"e2e_seconds": math.inf}),
            "chat-latency",
            "objectives.e2e_seconds",
            "got inf",
        ),
        (
            with_changes(selector={"region": "eu"}),
            "chat-latency",
            "selector.region",
            "unknown field",
        ),
        (with_changes(selector={"model": ""}), "chat-latency", "selector.model", "non-empty"),
        (with_changes(selector={"model": 8}), "chat-latency", "selector.model", "got 8"),
        (with_changes(selector=["m"]), "chat-latency", "selector", "must be a mapping"),
        (with_changes(owner="me"), "chat-latency", "owner", "unknown field"),
        ("just a string", "slos[0]", "slo", "must be a mapping"),
    ],
)
def test_validation_errors_name_the_slo_and_field(item, slo_name, field, hint) -> None:
    with pytest.raises(slo.SLOSpecError) as caught:
        load_slos({"slos": [item]})
    error = caught.value
    assert (error.slo_name, error.field) == (slo_name, field)
    assert hint in str(error), str(error)
    assert f"SLO {slo_name!r}, field {field!r}" in str(error)


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(slo.SLOSpecError, match="used by another SLO"):
        load_slos({"slos": [VALID, VALID]})


def test_section_must_be_a_list() -> None:
    with pytest.raises(slo.SLOSpecError, match="must be a list"):
        load_slos({"slos": {"name": "x"}})


def test_indicators_refuse_bad_values_built_in_code() -> None:
    with pytest.raises(slo.SLOError, match="positive and finite"):
        LatencyIndicator(LatencyMetric.ITL, math.nan)
    with pytest.raises(slo.SLOError, match="LatencyMetric"):
        LatencyIndicator("ttft", 0.5)  # type: ignore[arg-type]
    with pytest.raises(slo.SLOError, match="ErrorSource"):
        ErrorRatioIndicator("requests")  # type: ignore[arg-type]
    with pytest.raises(slo.SLOError, match="count_aborts must be true or false"):
        ErrorRatioIndicator(ErrorSource.REQUESTS, count_aborts=1)  # type: ignore[arg-type]


# -- properties: every string field and every number at its extremes -------------------------

ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
NUMBERS = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, 0, 0.0, -0.0, 1, 1.0, -1, 100, 1e308, 5e-324]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
)
FIELDS = {
    "name": ("name", "slos[0]"),
    "description": ("description", None),
    "selector.model": ("selector.model", None),
    "selector.tenant": ("selector.tenant", None),
    "selector.route": ("selector.route", None),
    "metric": ("indicator.latency.metric", None),
    "source": ("indicator.errors.source", None),
}


def _item_with(path: str, value: object) -> dict:
    if path == "name":
        return with_changes(name=value)
    if path == "description":
        return with_changes(description=value)
    if path.startswith("selector."):
        return with_changes(selector={path.removeprefix("selector."): value})
    if path == "metric":
        return with_changes(indicator={"latency": {"metric": value, "threshold_seconds": 1}})
    return with_changes(indicator={"errors": {"source": value}})


@SETTINGS
@given(st.sampled_from(sorted(FIELDS)), st.one_of(st.text(max_size=40), ANY_VALUE))
def test_every_string_field_is_accepted_or_refused_by_name(path: str, value: object) -> None:
    field, named = FIELDS[path]
    try:
        spec = only(_item_with(path, value))
    except slo.SLOSpecError as error:
        assert error.field == field
        assert error.slo_name == (named or "chat-latency")
        return
    # accepted: the value arrived unchanged where it belongs
    if path == "name":
        assert spec.name == value and isinstance(value, str) and value[:1].isalnum()
    elif path == "description":
        assert spec.description == value
    elif path.startswith("selector."):
        assert getattr(spec.selector, path.removeprefix("selector.")) == value
        assert isinstance(value, str) and value
    elif path == "metric":
        assert spec.indicator.metric.value == value
    else:
        assert spec.indicator.source.value == value


@SETTINGS
@given(NUMBERS)
def test_targets_are_fractions_strictly_inside_zero_and_one(value: float) -> None:
    try:
        spec = only(with_changes(target=value))
    except slo.SLOSpecError as error:
        assert error.field == "target"
        assert not 0 < value < 1
        return
    assert 0 < value < 1 and spec.target == value
    assert 0 < spec.error_budget <= 1  # 1.0 once the target is below one ulp of 1


@SETTINGS
@given(NUMBERS, st.sampled_from(["ttft", "tpot", "itl", "e2e"]), st.booleans())
def test_thresholds_are_positive_finite_seconds(value: float, metric: str, legacy: bool) -> None:
    if legacy:
        item = with_changes(indicator=..., objectives={f"{metric}_seconds": value})
        field = f"objectives.{metric}_seconds"
    else:
        item = with_changes(indicator={"latency": {"metric": metric, "threshold_seconds": value}})
        field = "indicator.latency.threshold_seconds"
    try:
        spec = only(item)
    except slo.SLOSpecError as error:
        assert error.field == field
        assert not (value > 0 and math.isfinite(float(value)))
        return
    assert spec.indicator.threshold_seconds == float(value) > 0
    assert math.isfinite(spec.indicator.threshold_seconds)


@SETTINGS
@given(NUMBERS)
def test_periods_are_28_or_30_days(value: float) -> None:
    try:
        spec = only(with_changes(period_days=value))
    except slo.SLOSpecError as error:
        assert error.field == "period_days"
        return
    assert spec.period_days in (28, 30) and spec.period_days == value


@SETTINGS
@given(st.sampled_from(["count_load_shedding", "count_aborts"]), ANY_VALUE)
def test_error_ratio_switches_are_booleans(key: str, value: object) -> None:
    item = with_changes(indicator={"errors": {"source": "requests", key: value}})
    try:
        spec = only(item)
    except slo.SLOSpecError as error:
        assert error.field == f"indicator.errors.{key}"
        assert not isinstance(value, bool)
        return
    assert getattr(spec.indicator, key) is value


def test_the_documented_example_loads() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "slo.md").read_text(encoding="utf-8")
    section = docs[docs.index("## The SLO model") :]
    example = section[section.index("```yaml") + len("```yaml") : section.index("```\n", 8)]
    ttft, availability = parse_config(yaml.safe_load(example)).slos
    assert ttft.indicator == LatencyIndicator(LatencyMetric.TTFT, 0.5)
    assert availability.indicator == ErrorRatioIndicator(ErrorSource.REQUESTS, True, False)


KNOWN_TOP_LEVEL = {"name", "description", "selector", "indicator", "target", "period_days"}


@SETTINGS
@given(st.text(max_size=20).filter(lambda key: key not in KNOWN_TOP_LEVEL | {"objectives"}))
def test_any_unknown_field_is_named(key: str) -> None:
    with pytest.raises(slo.SLOSpecError) as caught:
        only(VALID | {key: 1})
    assert caught.value.field == key


@SETTINGS
@given(st.text(max_size=20).filter(lambda kind: kind not in ("latency", "errors")), ANY_VALUE)
def test_any_unknown_indicator_kind_is_named(kind: str, body: object) -> None:
    with pytest.raises(slo.SLOSpecError) as caught:
        only(with_changes(indicator={kind: body}))
    assert caught.value.field == f"indicator.{kind}"
    assert "unknown indicator kind" in caught.value.problem
