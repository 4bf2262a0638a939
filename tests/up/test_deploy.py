"""docker-compose.yml and deploy/: validated by the tools that will run them. Images cannot
be pulled here, so `docker-compose config` (Debian's docker-compose), `promtool check config`
with the rule file `tailwatch rules export` writes, and `amtool check-config` stand in."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tailwatch.config import load_config
from tests.services import missing_service, promtool_binary

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def _tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        missing_service(f"no {name}: apt-get install -y {package}")
    return path  # type: ignore[return-value]


def _run(*command: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_compose_file_is_valid_and_publishes_on_loopback_only() -> None:
    compose = _tool("docker-compose", "docker-compose")
    result = _run(compose, "-f", str(ROOT / "docker-compose.yml"), "config")
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    wanted = {"engine", "collector", "console", "postgres", "prometheus", "alertmanager", "rules"}
    assert set(services) == wanted
    for name, service in services.items():
        for port in service.get("ports", []):
            text = port if isinstance(port, str) else f"{port.get('host_ip')}:{port}"
            assert text.startswith("127.0.0.1:"), (name, port)


def test_prometheus_config_with_the_exported_rules_passes_promtool(tmp_path: Path) -> None:
    promtool = promtool_binary()
    shutil.copy(DEPLOY / "prometheus.yml", tmp_path / "prometheus.yml")
    (tmp_path / "rules").mkdir()
    export = [sys.executable, "-m", "tailwatch.cli", "rules", "export", "--engine", "tailwatch"]
    export += ["--config", str(DEPLOY / "tailwatch.yaml")]
    export += ["--output", str(tmp_path / "rules" / "tailwatch.rules.yml")]
    result = subprocess.run(export, capture_output=True, text=True, timeout=120, env=os.environ)
    assert result.returncode == 0, result.stderr
    result = _run(promtool, "check", "config", str(tmp_path / "prometheus.yml"), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout and "rules found" in result.stdout


def test_alertmanager_config_passes_amtool() -> None:
    amtool = _tool("amtool", "prometheus-alertmanager")
    result = _run(amtool, "check-config", str(DEPLOY / "alertmanager.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_compose_tailwatch_yaml_loads(monkeypatch) -> None:
    monkeypatch.delenv("TAILWATCH_DB_URL", raising=False)
    config = load_config(DEPLOY / "tailwatch.yaml")
    assert config.database_url.startswith("postgresql+psycopg://")
    assert config.alerts.in_collector
    assert [t.url for t in config.collector.targets] == ["http://engine:8000/metrics"]
