"""``tailwatch up --prometheus URL`` end to end against a backfilled Prometheus 2.42
(tests/collectors/metrics_servers.py): the engines it prints, the one line for a server with
no engine series, and the evaluator evaluating the built-in rules on the server (``alerts run
--once --now``: the virtual clock, no wall-clock timing)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from collectors.prometheus import PrometheusReader
from collectors.prometheus.discovery import discover, discovery_table
from tests.alerts.eval_data import build
from tests.alerts.test_triage_prometheus import HOURS, PERTURB, START, overload
from tests.collectors.metrics_servers import Point, backfilled_prometheus
from tests.collectors.vllm_history import CapturingFake, vllm_points
from tests.services import free_port

ROOT = Path(__file__).resolve().parents[2]
#: Generous for a busy 2-core machine: the evaluator and Streamlit each import a lot.
UP_TIMEOUT_SECONDS = 240.0


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    env.pop("TAILWATCH_DB_URL", None)
    env.pop("TAILWATCH_METRICS_URL", None)
    return env


def _tailwatch(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tailwatch", *args],
        cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    fake = CapturingFake()
    build(overload, hours=HOURS, start=START, reader=fake)
    points, types = vllm_points(fake.records)
    with backfilled_prometheus(tmp_path_factory.mktemp("fleet"), points, types) as server:
        yield server.url


@pytest.fixture(scope="module")
def no_engines(tmp_path_factory):
    points = [Point("node_load1", (("instance", "n1"),), 0.5, START + k * 15.0) for k in range(40)]
    directory = tmp_path_factory.mktemp("no-engines")
    with backfilled_prometheus(directory, points, {"node_load1": "gauge"}) as server:
        yield server.url


def test_discovery_names_each_target_dialect_and_model(fleet) -> None:
    with PrometheusReader(fleet) as reader:
        found = discover(reader, START - 60, time.time())
    assert [(t.dialect, t.instance, t.model) for t in found.targets] == [
        ("vllm", f"r{i}", "m") for i in range(3)
    ]
    # 4 histograms of 11 or 8 buckets, 2 finished reasons, 3 counters, 3 gauges, and the 2
    # speculative-decoding counters (spec-acceptance-drop's)
    assert {t.num_series for t in found.targets} == {3 * 11 + 8 + 2 + 3 + 3 + 2}
    table = discovery_table(found).splitlines()
    assert table[0].split() == ["dialect", "instance", "model", "series"]
    assert table[1].split() == ["vllm", "r0", "m", "51"]


def test_a_server_without_engine_series_is_one_line(no_engines, tmp_path) -> None:
    done = _tailwatch(
        "up", "--prometheus", no_engines, "--console-port", str(free_port()), cwd=tmp_path
    )
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: {no_engines} holds no engine series over the last 7 days")
    assert "vLLM (vllm:*" in lines[0] and "SGLang" in lines[0] and "TensorRT-LLM" in lines[0]
    assert not (tmp_path / ".tailwatch" / "up.yaml").exists()


def test_a_bad_url_is_one_line(tmp_path) -> None:
    done = _tailwatch("up", "--prometheus", "ftp://x", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: --prometheus: expected an http(s) URL with a host, got 'ftp://x'"
    ]


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--engine-port", "9000"], "--engine-port"),
        (["--collector-port", "4318"], "--collector-port"),
        (
            ["--engine-port", "9000", "--collector-port", "9100"],
            "--engine-port and --collector-port",
        ),
    ],
)
def test_port_flags_for_what_it_does_not_start_are_refused(flags, named, tmp_path) -> None:
    """Never a flag silently ignored: with --prometheus no engine or collector starts, so their
    ports (even given at their defaults) are a mistake named in one line."""
    done = _tailwatch("up", "--prometheus", "http://127.0.0.1:9", *flags, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: {named}: for the bundled engines and collector, which --prometheus starts neither of"
    ]


def test_the_evaluator_evaluates_on_the_server(fleet, tmp_path) -> None:
    """``alerts run`` with a ``prometheus:`` section: the rules read the server, the alert
    state goes to the store. Mid-overload the queue alert is pending (one evaluation: its
    ``for:`` has not passed); before it, nothing."""
    config = tmp_path / "tailwatch.yaml"
    config.write_text(yaml.safe_dump({"prometheus": {"url": fleet}}))
    db = f"sqlite:///{tmp_path / 'own.db'}"
    assert _tailwatch("store", "migrate", "--db", db, cwd=tmp_path).returncode == 0
    common = ("alerts", "run", "--once", "--config", str(config), "--db", db)
    before = _tailwatch(*common, "--now", f"{PERTURB - 60:.0f}", cwd=tmp_path)
    assert before.returncode == 0, before.stderr
    assert "queue-growth" not in before.stdout, before.stdout
    during = _tailwatch(*common, "--now", f"{PERTURB + 600:.0f}", cwd=tmp_path)
    assert during.returncode == 0, during.stderr
    assert "queue-growth" in during.stdout, during.stdout + during.stderr
    assert "error:" not in during.stderr, during.stderr


def test_up_prometheus_discovers_proposes_and_runs_the_stack(fleet, tmp_path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tailwatch", "up", "--prometheus", fleet, "--console-port", str(port)],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    try:
        deadline = time.monotonic() + UP_TIMEOUT_SECONDS
        assert process.stdout is not None
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip())
            if line.startswith("Ctrl-C stops everything."):
                break
        out = "\n".join(lines)
        assert "Tailwatch is up." in out, out
        assert f"{fleet} holds 3 engine targets (1 models):" in out
        assert any(line.split() == ["vllm", "r1", "m", "51"] for line in lines), out
        assert "SLOs proposed from the server's last 7 days" in out, out
        written = yaml.safe_load((tmp_path / ".tailwatch" / "up.yaml").read_text())
        assert written["prometheus"] == {"url": fleet}
        assert {s["name"] for s in written["slos"]} == {"m-ttft", "m-itl"}
        assert "collector" not in written  # nothing scraped, nothing copied
    finally:
        os.killpg(process.pid, signal.SIGINT)
        rest, _ = process.communicate(timeout=90)
    assert process.returncode == 0, rest
    assert "evaluator: stopped" in rest and "console: stopped" in rest, rest
