"""The shared filters' URL validation, the markdown escaping of stored strings, the chart
builders' point cap and the ``tailwatch console`` options: pure, no store, no server."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from console import charts
from console.filters import (
    DEFAULT_RANGE,
    MAX_STEPS,
    RANGES,
    Filters,
    floor_to_step,
    parse_choice,
    parse_range,
    parse_until,
    step_for,
)
from console.launch import streamlit_command
from console.page_kit import escape
from tailwatch.cli import app

PUNCTUATION = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_url_value_is_a_known_choice_or_dropped_with_its_name(raw):
    key, warning = parse_range(raw)
    assert key in RANGES and (warning is None) == (raw in RANGES or raw == "")
    value, warning = parse_choice("tenant", raw, ["acme", "beta"])
    assert value in (None, "acme", "beta")
    if warning is not None:
        assert warning.startswith("tenant=")
    until, warning = parse_until(raw)
    assert until is None or math.isfinite(until)
    assert (until is None) or warning is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1796178495", 1796178495.0),
        ("2026-12-02T10:02:00Z", 1796205720.0),
        ("2026-12-02T10:02:00+00:00", 1796205720.0),
        ("2026-12-02T10:02:00", 1796205720.0),  # no zone: UTC
        ("yesterday", None),
        ("1e400", None),
        ("nan", None),
    ],
)
def test_until_is_unix_seconds_or_iso_utc(raw, expected):
    assert parse_until(raw)[0] == expected


def test_bad_range_names_the_parameter_and_falls_back():
    key, warning = parse_range("2y")
    assert key == DEFAULT_RANGE and warning.startswith("range='2y'")


@pytest.mark.parametrize("name", list(RANGES))
def test_every_range_has_at_most_max_steps(name):
    step = step_for(RANGES[name])
    assert RANGES[name] / step <= MAX_STEPS
    f = Filters(name, floor_to_step(1_796_178_495.5, step))
    assert f.end_seconds % step == 0 and f.end_seconds >= 1_796_178_495.5
    assert f.start_seconds == f.end_seconds - RANGES[name]


@pytest.mark.parametrize("name", [n for n, seconds in RANGES.items() if seconds >= 3600])
def test_ranges_of_an_hour_or_more_step_in_whole_minutes_the_roll_ups_answer(name):
    assert step_for(RANGES[name]) % 60 == 0


def test_selector_holds_only_what_was_chosen():
    assert Filters("1h", 0.0, model="m", tenant=None).selector() == {"model": "m"}


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_escaped_text_has_no_bare_punctuation(text):
    out = escape(text)
    assert "\n" not in out and "\r" not in out
    i = 0
    while i < len(out):
        if out[i] == "\\":
            assert out[i + 1] in PUNCTUATION
            i += 2
            continue
        assert out[i] not in PUNCTUATION, (text, out)
        i += 1
    assert re.sub(r"\\(.)", r"\1", out) == text.replace("\r", " ").replace("\n", " ")


def test_a_chart_refuses_more_than_max_points():
    ts = pd.date_range("2026-01-01", periods=charts.MAX_POINTS + 1, freq="s", tz="UTC")
    frame = pd.DataFrame({"ts": ts, "value": 1.0})
    with pytest.raises(ValueError, match="aggregate"):
        charts.series_chart(frame, ts[0], ts[-1], y="value", title="x")


def test_a_series_axis_says_plain_numbers_not_si_prefixes():
    """0.1 requests waiting is "0.1" on the axis, not "100m" (millions? minutes?)."""
    ts = pd.date_range("2026-01-01", periods=3, freq="min", tz="UTC")
    frame = pd.DataFrame({"ts": ts, "value": [0.0, 0.05, 0.1]})
    spec = charts.series_chart(frame, ts[0], ts[-1], y="value", title="requests").to_dict()
    formats = [
        layer["encoding"]["y"]["axis"]["format"]
        for layer in spec["layer"]
        if "axis" in layer.get("encoding", {}).get("y", {})
    ]
    assert formats and "s" not in formats[0], formats
    percent = charts.series_chart(frame, ts[0], ts[-1], y="value", title="x", percent=True)
    assert '"%"' in percent.to_json()


def test_percentile_chart_carries_the_slo_rule_and_annotations():
    ts = pd.Timestamp("2026-01-01", tz="UTC")
    frame = pd.DataFrame(
        [(ts, "p99", 0.2, 0.1, 0.25)],
        columns=["ts", "percentile", "seconds", "lower_seconds", "upper_seconds"],
    )
    notes = pd.DataFrame([(ts, "x", "firing")], columns=["ts", "alert", "state"])
    spec = charts.percentile_chart(
        frame, ts, ts + pd.Timedelta(minutes=5), thresholds=[("chat-ttft", 0.5)], annotations=notes
    ).to_dict()
    marks = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"]
             for layer in spec["layer"]]  # fmt: skip
    assert marks == ["area", "line", "rule", "rule"]
    datasets = list(spec["datasets"].values())
    assert [{"slo": "chat-ttft", "ms": 500.0}] in datasets


def test_the_server_binds_loopback_by_default():
    command = streamlit_command()
    assert "--server.address=127.0.0.1" in command and "--server.port=8501" in command
    assert "--browser.gatherUsageStats=false" in command


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--live", "-1"], "--live -1.0"),
        (["--db", " "], "--db ' '"),
        (["--host", ""], "--host ''"),
        (["--port", "0"], "0"),
    ],
)
def test_console_options_are_checked_before_starting(args, message):
    result = CliRunner().invoke(app, ["console", *args])
    assert result.exit_code == 2 and message in result.output, result.output


@pytest.mark.parametrize("raw", ["-1", "soon", "nan", "inf"])
def test_a_bad_live_setting_names_the_variable(raw):
    from console.settings import LIVE_ENV, load_settings

    with pytest.raises(ValueError, match=LIVE_ENV):
        load_settings({LIVE_ENV: raw})


def test_live_zero_turns_refresh_off():
    from console.settings import LIVE_ENV, load_settings

    assert load_settings({LIVE_ENV: "0"}).live_seconds is None
    assert load_settings({LIVE_ENV: "5"}).live_seconds == 5.0


@settings(max_examples=100, deadline=None)
@given(st.floats(min_value=1e9, max_value=9.9e10))
def test_a_pinned_time_written_back_parses_again(t):
    assert parse_until(f"{t:.0f}")[0] == float(f"{t:.0f}")
