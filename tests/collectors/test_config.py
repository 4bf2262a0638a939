"""tailwatch.yaml: defaults, overrides, and errors that name the key and the value; and
`tailwatch collect` refusing a bad configuration with one line."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from collectors.config import ConfigError, load_config, parse_config
from collectors.store import DB_URL_ENV
from tailwatch.cli import app

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
    assert (collector.scrape_interval_seconds, collector.scrape_timeout_seconds) == (5.0, 5.0)
    assert (collector.listen_host, collector.listen_port) == ("127.0.0.1", 4318)
    assert collector.targets == ()
    assert (
        parse_config({"collector": {"scrape_interval_seconds": 2}}).collector.scrape_timeout_seconds
        == 2
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
            "collector.scrape_timeout_seconds: 10 exceeds scrape_interval_seconds 5",
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
        ([], None, "no targets: list collector.targets in the config or pass --target"),
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
