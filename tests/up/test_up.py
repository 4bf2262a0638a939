"""`tailwatch up`: the whole stack in subprocesses on free ports, health-gated, and a SIGTERM
that leaves no process behind; a taken port is one error line before anything starts."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tailwatch.config import parse_config
from tailwatch.up import UpOptions, collector_config, taken_port
from tests.services import free_port

#: Bounded waits, generous for a busy 2-core machine (a cold torch import is most of it).
START_TIMEOUT_SECONDS = 300
STOP_TIMEOUT_SECONDS = 120


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    env.pop("TAILWATCH_DB_URL", None)
    return env


def _up(cwd: Path, *args: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "tailwatch.cli", "up", *args]
    return subprocess.Popen(
        command, cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _gone(pid: int) -> bool:
    """Whether no process (not even a zombie of ours) has ``pid``, and its group is empty."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        pass
    else:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _wait_for_state(process: subprocess.Popen, state: Path) -> dict:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"tailwatch up exited early:\n{process.stdout.read()}")
        if state.exists():
            return json.loads(state.read_text())
        time.sleep(0.5)
    process.kill()
    pytest.fail(f"tailwatch up was not ready in {START_TIMEOUT_SECONDS} s")


def test_up_starts_healthy_and_sigterm_leaves_no_process(tmp_path: Path) -> None:
    ports = [free_port() for _ in range(3)]
    process = _up(
        tmp_path,
        *("--replicas", "1", "--no-demo", "--engine-port", str(ports[0])),
        *("--collector-port", str(ports[1]), "--console-port", str(ports[2])),
    )
    try:
        state = _wait_for_state(process, tmp_path / ".tailwatch" / "up.json")
        pids = state["pids"]
        assert sorted(pids) == ["collector", "console", "engine-0"]
        urls = state["urls"]
        assert urls["engines"] == [f"http://127.0.0.1:{ports[0]}"]
        assert httpx.get(f"{urls['engines'][0]}/ready", timeout=10).status_code == 200
        targets = httpx.get(f"{urls['collector']}/targets", timeout=10).json()["targets"]
        assert [t["health"] for t in targets] == ["up"]
        assert httpx.get(f"{urls['console']}/_stcore/health", timeout=10).text == "ok"
        # The evaluator runs inside the collector (the generated config says so).
        generated = (tmp_path / ".tailwatch" / "up.yaml").read_text()
        assert parse_config(yaml.safe_load(generated)).alerts.in_collector
        for name in pids:
            assert (tmp_path / ".tailwatch" / "logs" / f"{name}.log").exists()
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=STOP_TIMEOUT_SECONDS)
    assert process.returncode == 0, output
    # No SLOs configured and no traffic: it waits for observations (tests/up/test_up_slos.py
    # runs the calibration itself on a seeded store).
    assert "no SLOs configured: proposing TTFT and ITL SLOs once the store holds" in output
    # the console first; the engine before the collector, which receives its last spans
    stops = [line.split(":")[0] for line in output.splitlines() if ": stopped" in line]
    assert stops == ["console", "engine-0", "collector"], output
    assert all(_gone(pid) for pid in pids.values()), (pids, output)
    assert not (tmp_path / ".tailwatch" / "up.json").exists()


def test_a_taken_port_is_one_error_line_naming_the_flag(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        args = ("--no-demo", "--replicas", "1", "--collector-port", str(port))
        result = subprocess.run(
            [sys.executable, "-m", "tailwatch.cli", "up", *args, "--console-port", "0"],
            cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode == 2
        assert "--console-port" in result.stderr  # 0 is refused: up connects to its ports
        args += ("--engine-port", str(free_port()), "--console-port", str(free_port()))
        result = subprocess.run(
            [sys.executable, "-m", "tailwatch.cli", "up", *args],
            cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert f"port {port}" in lines[0] and "--collector-port" in lines[0]
    assert not (tmp_path / ".tailwatch" / "logs").exists()  # nothing was started


def test_ports_given_twice_or_past_the_range_name_the_flag() -> None:
    clash = UpOptions(replicas=3, engine_port=40000, collector_port=40002)
    assert "--collector-port" in taken_port(clash) and "40002" in taken_port(clash)
    assert "--engine-port" in taken_port(UpOptions(replicas=2, engine_port=65535))


def test_the_generated_config_loads_and_scrapes_every_replica() -> None:
    urls = ["http://127.0.0.1:8000", "http://127.0.0.1:8001"]
    for demo in (False, True):
        config = parse_config(collector_config(UpOptions(demo=demo), urls, "sqlite:///x.db"))
        assert [t.url for t in config.collector.targets] == [f"{u}/metrics" for u in urls]
        assert config.alerts.in_collector
        assert (config.alerts.window_scale < 1) == demo


@settings(max_examples=40, deadline=None)
@given(
    replicas=st.integers(1, 16),
    engine=st.integers(1, 65535),
    collector=st.integers(1, 65535),
    console=st.integers(1, 65535),
)
def test_taken_port_never_raises_and_names_a_flag(replicas, engine, collector, console) -> None:
    options = UpOptions(
        replicas=replicas, engine_port=engine, collector_port=collector, console_port=console
    )
    problem = taken_port(options)
    if problem is not None:
        assert problem.startswith("port ") and " --" in problem


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--replicas", "0"], "--replicas=0"),
        (["--replicas", "17"], "--replicas=17"),
        (["--config", "missing.yaml"], "cannot read missing.yaml"),
        (["--db", " "], "--db"),
        (["--engine-port", "70000"], "--engine-port"),
    ],
)
def test_bad_options_are_one_error_before_anything_starts(tmp_path, monkeypatch, args, expected):
    from typer.testing import CliRunner

    from tailwatch.cli import app

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["up", "--no-demo", *args])
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert not (tmp_path / ".tailwatch").exists()


def test_the_engines_stop_after_the_console_and_before_the_collector(tmp_path: Path) -> None:
    """An engine exports its last spans while it drains: the collector must still be up."""
    from tailwatch.processes import Child, Stack

    stack = Stack(tmp_path)
    for name in ("engine-0", "engine-1", "collector", "console"):
        stack.children.append(Child(name, None, tmp_path / f"{name}.log"))  # type: ignore[arg-type]
    assert [c.name for c in stack.stop_order()] == ["console", "engine-1", "engine-0", "collector"]
    stack.children = stack.children[:2]  # the collector never started: engines still stop
    assert [c.name for c in stack.stop_order()] == ["engine-1", "engine-0"]
