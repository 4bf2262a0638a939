"""tailwatch.yaml: defaults, overrides, and errors that name the key and the value; and
`tailwatch collect` refusing a bad configuration with one line."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from collectors.config import DEFAULT_TIMEOUT_SHARE, CollectorConfig, ConfigError, with_interval
from collectors.store import DB_URL_ENV
from tailwatch.cli import app
from tailwatch.config import load_config, parse_config

EXAMPLE = """
database_url: sqlite:///example.db
collector:
  scrape_interval_seconds: 10
  scrape_timeout_seconds: 4
  max_body_bytes: 1048576
  listen: 127.0.0.1:9100
  targets:
    - url: http://127.0.0.1:8000/metrics
      name: replica-a
      labels: {replica: a, zone: 1}
    - url: http://10.0.0.7:8000/metrics
"""


def test_a_full_configuration_loads_into_frozen_dataclasses(tmp_path, monkeypatch):
    monkeypatch.delenv(DB_URL_ENV, raising=False)
    path = tmp_path / "tailwatch.yaml"
    path.write_text(EXAMPLE)
    config = load_config(path)
    assert config.database_url == "sqlite:///example.db"
    collector = config.collector
    assert (collector.scrape_interval_seconds, collector.scrape_timeout_seconds) == (10.0, 4.0)
    assert collector.max_body_bytes == 1048576
    assert (collector.listen_host, collector.listen_port) == ("127.0.0.1", 9100)
    first, second = collector.targets
    assert (first.name, dict(first.labels)) == ("replica-a", {"replica": "a", "zone": "1"})
    assert second.name == "10.0.0.7:8000"  # default name: host:port
    target = first.to_target()
    assert (target.name, target.url) == ("replica-a", "http://127.0.0.1:8000/metrics")
    with pytest.raises(AttributeError):
        collector.scrape_interval_seconds = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        first.labels["replica"] = "b"  # type: ignore[index]


def test_defaults_and_the_database_url_override(monkeypatch):
    monkeypatch.delenv(DB_URL_ENV, raising=False)
    config = parse_config({})
    assert config.database_url is None  # the store's default: .tailwatch/tailwatch.db
    collector = config.collector
    # the timeout defaults to 0.8 of the interval, below it (Prometheus: timeout <= interval)
    assert (collector.scrape_interval_seconds, collector.scrape_timeout_seconds) == (5.0, 4.0)
    assert (collector.listen_host, collector.listen_port) == ("127.0.0.1", 4318)
    assert collector.targets == ()
    assert (
        parse_config({"collector": {"scrape_interval_seconds": 2}}).collector.scrape_timeout_seconds
        == 1.6
    )
    monkeypatch.setenv(DB_URL_ENV, "postgresql://db/tailwatch")
    assert parse_config({"database_url": "sqlite:///x.db"}).database_url == (
        "postgresql://db/tailwatch"
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], "(top level): expected a mapping, got [1, 2]"),
        ({"colector": {}}, "colector: unknown key"),
        ({"database_url": 5}, "database_url: expected a string, got 5"),
        ({"collector": []}, "collector: expected a mapping, got []"),
        ({"collector": {"interval": 5}}, "collector.interval: unknown key"),
        (
            {"collector": {"scrape_interval_seconds": "5s"}},
            "collector.scrape_interval_seconds: expected a number > 0, got '5s'",
        ),
        (
            {"collector": {"scrape_interval_seconds": 0}},
            "collector.scrape_interval_seconds: expected a number > 0, got 0",
        ),
        (
            {"collector": {"scrape_interval_seconds": 5, "scrape_timeout_seconds": 10}},
            "collector.scrape_timeout_seconds: 10 exceeds collector.scrape_interval_seconds 5",
        ),
        (
            {"collector": {"max_body_bytes": 1.5}},
            "collector.max_body_bytes: expected a positive integer, got 1.5",
        ),
        ({"collector": {"listen": "4318"}}, "collector.listen: expected host:port, got '4318'"),
        (
            {"collector": {"listen": "127.0.0.1:99999"}},
            "collector.listen: expected host:port with a port 0-65535, got '127.0.0.1:99999'",
        ),
        ({"collector": {"targets": {"url": "x"}}}, "collector.targets: expected a list"),
        ({"collector": {"targets": [{"name": "a"}]}}, "collector.targets[0].url: required"),
        (
            {"collector": {"targets": [{"url": "http://a:1/m"}, {"url": "localhost:8000"}]}},
            "collector.targets[1].url: expected an http(s) URL with a host, got 'localhost:8000'",
        ),
        (
            {"collector": {"targets": [{"url": "http://[::1/metrics"}]}},
            "collector.targets[0].url: 'http://[::1/metrics' is not a valid URL",
        ),
        (
            {"collector": {"targets": [{"url": "http://a:99999/metrics"}]}},
            "collector.targets[0].url: 'http://a:99999/metrics' has a port outside 1-65535",
        ),
        (
            {"collector": {"targets": [{"url": "http://a:1/m", "labels": {"bad-name": "x"}}]}},
            "collector.targets[0].labels: invalid label name 'bad-name'",
        ),
        (
            {"collector": {"targets": [{"url": "http://a:1/m", "labels": {"target": "x"}}]}},
            "collector.targets[0].labels.target: reserved",
        ),
        (
            {"collector": {"targets": [{"url": "http://a:1/m", "labels": {"zone": [1]}}]}},
            "collector.targets[0].labels.zone: expected a string, got [1]",
        ),
        (
            {"collector": {"targets": [{"url": "http://a:1/m", "lables": {}}]}},
            "collector.targets[0].lables: unknown key",
        ),
        (
            {"collector": {"targets": [{"url": "http://a:1/m"}, {"url": "http://a:1/other"}]}},
            "collector.targets[1].name: 'a:1' is already used",
        ),
    ],
)
def test_errors_name_the_key_and_the_value(data, message, monkeypatch):
    monkeypatch.delenv(DB_URL_ENV, raising=False)
    with pytest.raises(ConfigError) as raised:
        parse_config(data)
    assert str(raised.value).startswith(message), str(raised.value)


def test_a_file_that_is_not_yaml_or_missing_is_named(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("collector: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: not valid YAML at line 2"):
        load_config(bad)
    with pytest.raises(ConfigError, match=r"cannot read .*missing.yaml"):
        load_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("args", "yaml_text", "message"),
    [
        (
            ["--config", "{dir}/tw.yaml"],
            "collector: {interval: 5}\n",
            "collector.interval: unknown key",
        ),
        (["--config", "{dir}/none.yaml"], None, "cannot read"),
        (
            ["--target", "localhost:8000"],
            None,
            "--target: expected an http(s) URL with a host, got 'localhost:8000'",
        ),
        (
            ["--target", "http://127.0.0.1:1/metrics", "--interval", "0"],
            None,
            "--interval: expected a number > 0",
        ),
        (
            ["--target", "http://127.0.0.1:1/metrics", "--listen", "nope"],
            None,
            "--listen: expected host:port",
        ),
        (
            [
                "--target",
                "http://127.0.0.1:1/m",
                "--listen",
                "127.0.0.1:0",
                "--db-url",
                "nope://u:secret@h/db",
            ],
            None,
            "cannot open nope://u:***@h/db: Can't load plugin",
        ),
    ],
)
def test_collect_with_a_bad_configuration_exits_2_with_one_line(
    tmp_path, monkeypatch, args, yaml_text, message
):
    monkeypatch.chdir(tmp_path)  # no ./tailwatch.yaml here
    monkeypatch.delenv(DB_URL_ENV, raising=False)
    if yaml_text is not None:
        (tmp_path / "tw.yaml").write_text(yaml_text)
    result = CliRunner().invoke(app, ["collect", *(a.format(dir=tmp_path) for a in args)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), result.output
    assert "Traceback" not in result.output and "secret" not in result.output
    assert not (tmp_path / ".tailwatch").exists()  # nothing opened before validation


def test_targets_file_is_relative_to_the_config_folder_and_gpu_defaults_to_auto(
    tmp_path, monkeypatch
):
    monkeypatch.delenv(DB_URL_ENV, raising=False)
    folder = tmp_path / "etc"
    folder.mkdir()
    (folder / "tw.yaml").write_text("collector:\n  targets_file: sd/targets.yaml\n")
    collector = load_config(folder / "tw.yaml").collector
    assert collector.targets_file == folder / "sd" / "targets.yaml"
    assert collector.gpu == "auto"
    absolute = parse_config({"collector": {"targets_file": "/srv/t.json", "gpu": "on"}})
    assert (str(absolute.collector.targets_file), absolute.collector.gpu) == ("/srv/t.json", "on")
    assert parse_config({}).collector.targets_file is None


@pytest.mark.parametrize(("text", "mode"), [("off", "off"), ("on", "on"), ("'off'", "off")])
def test_gpu_off_and_on_read_as_modes_although_yaml_reads_them_as_booleans(
    tmp_path, monkeypatch, text, mode
):
    monkeypatch.delenv(DB_URL_ENV, raising=False)
    (tmp_path / "tw.yaml").write_text(f"collector:\n  gpu: {text}\n")
    assert load_config(tmp_path / "tw.yaml").collector.gpu == mode


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"targets_file": ""}, "collector.targets_file: expected a file path, got ''"),
        ({"targets_file": ["a"]}, "collector.targets_file: expected a file path, got ['a']"),
        ({"gpu": "yes please"}, "collector.gpu: expected one of auto, on, off, got 'yes please'"),
        ({"gpu": 1}, "collector.gpu: expected one of auto, on, off, got 1"),
    ],
)
def test_targets_file_and_gpu_errors_name_the_key(data, message, monkeypatch):
    monkeypatch.delenv(DB_URL_ENV, raising=False)
    with pytest.raises(ConfigError) as raised:
        parse_config({"collector": data})
    assert str(raised.value) == message


def test_store_retention_defaults_and_values(monkeypatch, tmp_path):
    monkeypatch.delenv(DB_URL_ENV, raising=False)
    config = parse_config({})
    assert (config.store.raw_retention_hours, config.store.rollup_retention_days) == (48, 30)
    policy = config.store.retention_policy()
    assert policy.raw_retention_seconds == 48 * 3600
    assert policy.rollup_retention_seconds == 30 * 86400
    path = tmp_path / "tw.yaml"
    path.write_text("store:\n  raw_retention_hours: 6\n  rollup_retention_days: 0.5\n")
    store = load_config(path).store
    assert store.retention_policy().raw_retention_seconds == 6 * 3600
    assert store.retention_policy().rollup_retention_seconds == 12 * 3600


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"store": []}, "store: expected a mapping, got []"),
        ({"store": {"raw_retention": 1}}, "store.raw_retention: unknown key (known: "),
        (
            {"store": {"raw_retention_hours": 0}},
            "store.raw_retention_hours: expected a number > 0, got 0",
        ),
        (
            {"store": {"raw_retention_hours": "48h"}},
            "store.raw_retention_hours: expected a number > 0, got '48h'",
        ),
        (
            {"store": {"rollup_retention_days": True}},
            "store.rollup_retention_days: expected a number > 0, got True",
        ),
        (
            {"store": {"raw_retention_hours": 0.001}},
            "store.raw_retention_hours: expected at least 0.166667 (10 minutes), got 0.001",
        ),
        (
            {"store": {"raw_retention_hours": 72, "rollup_retention_days": 2}},
            "store.rollup_retention_days: 2 (48 h) is shorter than raw_retention_hours 72",
        ),
    ],
)
def test_store_retention_errors_name_the_key_and_value(data, message):
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    assert str(caught.value).startswith(message), str(caught.value)


def test_prometheus_sources_are_parsed_with_defaults() -> None:
    config = parse_config(
        {
            "collector": {
                "scrape_interval_seconds": 10,
                "prometheus_sources": [
                    {"url": "http://127.0.0.1:9090"},
                    {
                        "url": "https://mimir.example/prometheus",
                        "match": '{__name__=~"vllm:.*"}',
                        "headers": {"X-Scope-OrgID": "team-a"},
                        "labels": {"cluster": "eu1"},
                        "interval_seconds": 30,
                        "delay_seconds": 60,
                    },
                ],
            }
        }
    )
    first, second = config.collector.prometheus_sources
    assert (first.url, first.match, first.interval_seconds, first.delay_seconds) == (
        "http://127.0.0.1:9090",
        None,
        None,
        0.0,
    )
    assert second.match == ('{__name__=~"vllm:.*"}',)
    assert dict(second.headers) == {"X-Scope-OrgID": "team-a"}
    assert dict(second.labels) == {"cluster": "eu1"}
    assert (second.interval_seconds, second.delay_seconds) == (30.0, 60.0)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"url": "localhost:9090"}, "prometheus_sources[0].url: expected an http(s) URL"),
        ({}, "prometheus_sources[0].url: required"),
        ({"url": "http://p:9090", "match": []}, "prometheus_sources[0].match: expected series"),
        ({"url": "http://p:9090", "step": 1}, "prometheus_sources[0].step: unknown key"),
        ({"url": "http://p:9090", "delay_seconds": -1}, "delay_seconds: expected a number >= 0"),
        (
            {"url": "http://p:9090", "interval_seconds": 0},
            "interval_seconds: expected a number > 0",
        ),
        ({"url": "http://p:9090", "headers": {"a": 1}}, "prometheus_sources[0].headers: expected"),
        ({"url": "http://p:9090", "labels": {"target": "x"}}, "labels.target: reserved"),
    ],
)
def test_bad_prometheus_sources_name_the_key(entry, message) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_config({"collector": {"prometheus_sources": [entry]}})


def test_scrape_protocols_default_to_openmetrics_first_and_are_validated() -> None:
    assert parse_config({}).collector.scrape_protocols == (
        "OpenMetricsText1.0.0",
        "PrometheusText0.0.4",
    )
    chosen = parse_config({"collector": {"scrape_protocols": ["PrometheusText0.0.4"]}})
    assert chosen.collector.scrape_protocols == ("PrometheusText0.0.4",)
    for bad, message in (
        ([], "collector.scrape_protocols: expected a non-empty list"),
        (["PrometheusProto"], "collector.scrape_protocols[0]: expected one of"),
        (
            ["PrometheusText0.0.4", "PrometheusText0.0.4"],
            "collector.scrape_protocols[1]: PrometheusText0.0.4 is listed twice",
        ),
    ):
        with pytest.raises(ConfigError, match=re.escape(message)):
            parse_config({"collector": {"scrape_protocols": bad}})


def test_span_retention_defaults_to_14_days_and_reaches_the_policy() -> None:
    store = parse_config({}).store
    assert store.span_retention_days == 14.0
    assert store.retention_policy().span_retention_seconds == 14 * 86400.0
    custom = parse_config({"store": {"span_retention_days": 3}}).store
    assert custom.retention_policy().span_retention_seconds == 3 * 86400.0
    for bad in (0, -1, "a week", 0.0001):
        with pytest.raises(ConfigError, match=re.escape("store.span_retention_days")):
            parse_config({"store": {"span_retention_days": bad}})


def test_alert_retention_defaults_to_30_days_and_reaches_the_policy() -> None:
    assert parse_config({}).store.retention_policy().alert_retention_seconds == 30 * 86400.0
    custom = parse_config({"store": {"alert_retention_days": 7}}).store
    assert custom.retention_policy().alert_retention_seconds == 7 * 86400.0
    for bad in (0, -1, "a month", 0.0001, float("nan")):
        with pytest.raises(ConfigError, match=re.escape("store.alert_retention_days")):
            parse_config({"store": {"alert_retention_days": bad}})


positive_seconds = st.floats(min_value=1e-9, max_value=1e9, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(interval=positive_seconds, timeout=st.one_of(st.none(), positive_seconds))
def test_the_scrape_timeout_is_at_most_the_interval_and_defaults_below_it(interval, timeout):
    section = {"scrape_interval_seconds": interval}
    if timeout is not None:
        section["scrape_timeout_seconds"] = timeout
    if timeout is not None and timeout > interval:
        with pytest.raises(ConfigError) as raised:
            parse_config({"collector": section})
        message = str(raised.value)
        assert message.startswith("collector.scrape_timeout_seconds: ")
        assert "exceeds collector.scrape_interval_seconds" in message
        return
    collector = parse_config({"collector": section}).collector
    expected = interval * DEFAULT_TIMEOUT_SHARE if timeout is None else timeout
    assert collector.scrape_timeout_seconds == expected <= interval
    if timeout is None:
        assert collector.scrape_timeout_seconds < interval


@pytest.mark.parametrize("interval", [float("inf"), float("nan"), 0.0, -1.0])
def test_an_interval_that_is_not_a_finite_positive_number_is_refused(interval):
    with pytest.raises(ConfigError, match=r"collector\.scrape_interval_seconds: expected a"):
        parse_config({"collector": {"scrape_interval_seconds": interval}})
    with pytest.raises(ConfigError, match="--interval: expected a number > 0"):
        with_interval(CollectorConfig(), interval)


@settings(max_examples=60, deadline=None)
@given(configured=positive_seconds, interval=positive_seconds)
def test_interval_flag_keeps_a_timeout_that_fits_and_lowers_one_that_does_not(configured, interval):
    config = CollectorConfig(scrape_interval_seconds=configured, scrape_timeout_seconds=configured)
    changed = with_interval(config, interval)
    assert changed.scrape_interval_seconds == interval
    if configured <= interval:
        assert changed.scrape_timeout_seconds == configured
    else:  # NOTE: the default share of the new interval, not the interval itself
        assert changed.scrape_timeout_seconds == DEFAULT_TIMEOUT_SHARE * interval < interval
