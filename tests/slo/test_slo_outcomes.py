"""Which outcomes count against availability, and error ratios from counter increases."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import slo
from slo import (
    ErrorRatioIndicator,
    ErrorSource,
    Outcome,
    error_ratio_from_increases,
    error_ratios_by_window,
    finished_reason_outcome,
    http_code_outcome,
)

REQUESTS = ErrorRatioIndicator(ErrorSource.REQUESTS)
HTTP = ErrorRatioIndicator(ErrorSource.HTTP_RESPONSES)


@pytest.mark.parametrize(
    ("reason", "outcome"),
    [
        ("stop", Outcome.GOOD),
        ("length", Outcome.GOOD),
        ("repetition", Outcome.GOOD),
        ("success", Outcome.GOOD),  # TGI and Dynamo's coarse flag
        ("error", Outcome.ERROR),  # TGI's failure counter, vLLM >= 0.11
        ("abort", Outcome.ABORTED),
        ("rejected", Outcome.LOAD_SHED),  # the bundled engine's admission refusal
        ("", Outcome.UNRECOGNISED),  # SGLang: no finished_reason at all
        ("Stop", Outcome.UNRECOGNISED),
        ("timeout", Outcome.UNRECOGNISED),
    ],
)
def test_finished_reasons(reason: str, outcome: Outcome) -> None:
    assert finished_reason_outcome(reason) is outcome


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        ("200", Outcome.GOOD),
        ("101", Outcome.GOOD),
        ("304", Outcome.GOOD),
        ("400", Outcome.GOOD),  # the server answered a malformed request correctly
        ("404", Outcome.GOOD),
        ("429", Outcome.LOAD_SHED),
        ("499", Outcome.ABORTED),  # client closed the request
        ("500", Outcome.ERROR),
        ("503", Outcome.ERROR),  # draining or dead: unavailable, not deliberate shedding
        ("599", Outcome.ERROR),
        ("2xx", Outcome.UNRECOGNISED),
        ("600", Outcome.UNRECOGNISED),
        ("099", Outcome.UNRECOGNISED),
        ("5000", Outcome.UNRECOGNISED),
        (" 500", Outcome.UNRECOGNISED),
        ("", Outcome.UNRECOGNISED),
    ],
)
def test_http_codes(code: str, outcome: Outcome) -> None:
    assert http_code_outcome(code) is outcome


# (indicator, increases, bad, valid, left out)
CASES = [
    (REQUESTS, {"stop": 90, "length": 5, "error": 5}, 5, 100, 0),
    # load shedding counts by default; aborts are left out, and do not dilute the ratio
    (REQUESTS, {"stop": 80, "error": 5, "rejected": 15, "abort": 50}, 20, 100, 50),
    (
        ErrorRatioIndicator(ErrorSource.REQUESTS, count_load_shedding=False),
        {"stop": 80, "error": 5, "rejected": 15},
        5,
        85,
        15,
    ),
    (
        ErrorRatioIndicator(ErrorSource.REQUESTS, count_aborts=True),
        {"stop": 50, "abort": 50},
        50,
        100,
        0,
    ),
    (REQUESTS, {"success": 990, "error": 10}, 10, 1000, 0),  # TGI
    (HTTP, {"200": 900, "400": 50, "500": 30, "503": 10, "429": 10}, 50, 1000, 0),
    (
        ErrorRatioIndicator(ErrorSource.HTTP_RESPONSES, count_load_shedding=False),
        {"200": 90, "429": 900, "500": 10},
        10,
        100,
        900,
    ),
    (HTTP, {"200": 10, "499": 5}, 0, 10, 5),
    (REQUESTS, {"stop": 2.5, "error": 0.5}, 0.5, 3.0, 0),  # extrapolated increases
]


@pytest.mark.parametrize(("indicator", "increases", "bad", "valid", "left_out"), CASES)
def test_error_ratio_from_increases(indicator, increases, bad, valid, left_out) -> None:
    result = error_ratio_from_increases(increases, indicator)
    assert (result.num_bad, result.num_valid, result.num_left_out) == (bad, valid, left_out)
    assert result.error_ratio == pytest.approx(bad / valid)
    assert dict(result.unrecognised) == {}


def test_no_traffic_is_nan_and_unrecognised_values_are_reported_not_counted() -> None:
    assert math.isnan(error_ratio_from_increases({}, REQUESTS).error_ratio)
    assert math.isnan(error_ratio_from_increases({"stop": 0, "error": 0}, REQUESTS).error_ratio)
    result = error_ratio_from_increases({"stop": 9, "error": 1, "": 40, "new": 2}, REQUESTS)
    assert result.error_ratio == pytest.approx(0.1)
    assert dict(result.unrecognised) == {"": 40, "new": 2}
    only_unknown = error_ratio_from_increases({"": 40}, REQUESTS)  # SGLang by reason
    assert math.isnan(only_unknown.error_ratio)
    assert dict(only_unknown.unrecognised) == {"": 40}


@pytest.mark.parametrize(
    ("increases", "message"),
    [
        ({"stop": -1}, "increase for 'stop' must be finite and >= 0"),
        ({"stop": math.nan}, "got nan"),
        ({"error": math.inf}, "got inf"),
        ({"stop": "3"}, "must be a number, got '3'"),
        ({"stop": True}, "must be a number, got True"),
        ({500: 1}, "label values must be strings, got 500"),
    ],
)
def test_bad_increases_are_refused_by_name(increases, message) -> None:
    with pytest.raises(slo.SLOError) as caught:
        error_ratio_from_increases(increases, REQUESTS)
    assert message in str(caught.value)


def test_ratios_by_window_feed_the_burn_rate_table() -> None:
    # 99.9 %, 30 d: 2 % errors over both 1 h and 5 m burns at 20 > 14.4: the page row fires.
    windows = {300.0: {"stop": 98, "error": 2}, 3600.0: {"stop": 980, "error": 20}}
    windows |= {w: {"stop": 1} for w in (1800.0, 7200.0, 21600.0, 86400.0, 259200.0)}
    ratios = error_ratios_by_window(windows, REQUESTS)
    assert ratios[300.0] == pytest.approx(0.02)
    checks = slo.evaluate_burn_rates(ratios, 0.999, slo.SRE_WORKBOOK_30D)
    assert slo.firing_severities(checks) == ("page",)


COUNTS = st.floats(min_value=0, max_value=1e12, allow_nan=False)
REASONS = st.sampled_from(["stop", "length", "error", "abort", "rejected", "success", "", "x"])
CODES = st.one_of(st.integers(100, 599).map(str), st.text(max_size=4))


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(
        st.tuples(st.just(ErrorSource.REQUESTS), st.dictionaries(REASONS, COUNTS)),
        st.tuples(st.just(ErrorSource.HTTP_RESPONSES), st.dictionaries(CODES, COUNTS)),
    ),
    st.booleans(),
    st.booleans(),
)
def test_every_request_is_counted_once(source_and_increases, shedding: bool, aborts: bool):
    source, increases = source_and_increases
    result = error_ratio_from_increases(increases, ErrorRatioIndicator(source, shedding, aborts))
    total = result.num_valid + result.num_left_out + sum(result.unrecognised.values())
    assert total == pytest.approx(sum(increases.values()), rel=1e-9, abs=1e-9)
    assert 0 <= result.num_bad <= result.num_valid
    assert math.isnan(result.error_ratio) or 0 <= result.error_ratio <= 1
