"""`tailwatch init`: the commented tailwatch.yaml it writes loads, and it never overwrites
a file unless told to."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tailwatch.cli import app
from tailwatch.config import load_config

runner = CliRunner()


def test_init_writes_a_config_that_loads(tmp_path: Path) -> None:
    path = tmp_path / "tailwatch.yaml"
    result = runner.invoke(app, ["init", str(path)])
    assert result.exit_code == 0, result.output
    config = load_config(path)
    assert config.alerts.in_collector
    assert [s.name for s in config.slos] == ["chat-ttft", "availability"]
    assert config.collector.targets[0].url == "http://127.0.0.1:8000/metrics"
    text = path.read_text()
    assert "vllm" in text and "prometheus_sources:" in text and "notifiers:" in text


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    path = tmp_path / "tailwatch.yaml"
    path.write_text("mine\n")
    result = runner.invoke(app, ["init", str(path)])
    assert result.exit_code == 2
    assert "exists" in result.output and "--force" in result.output
    assert path.read_text() == "mine\n"
    assert runner.invoke(app, ["init", str(path), "--force"]).exit_code == 0
    assert load_config(path).slos


def test_init_names_a_folder_given_as_the_path(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init", str(tmp_path)])
    assert result.exit_code == 2 and "is a folder" in result.output
