"""`tailwatch demo` (make run): a real engine server with demo traffic, read from /metrics."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tailwatch.demo_summary import RunCounts, engine_counts, mismatches


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: Seconds a hog process spins at most, should the test that started it never kill it.
HOG_LIMIT_SECONDS = 300
#: Hogs at most (one per core up to this), so a many-core runner is not swamped.
MAX_HOGS = 16


def _env() -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "120", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("TAILWATCH_DB_URL", None)  # the demo's default store, under its cwd
    return env


def _demo(*args: str, cwd=None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "tailwatch.cli", "demo", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=240, env=_env(), cwd=cwd)


@contextlib.contextmanager
def cpu_hogs() -> Iterator[None]:
    """One busy-looping process per core for the duration of the block (each also stops
    by itself after HOG_LIMIT_SECONDS), so a quiet machine cannot hide a race."""
    spin = "import time\nend = time.monotonic() + %d\nwhile time.monotonic() < end: pass"
    spin %= HOG_LIMIT_SECONDS
    num_cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2
    hogs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(min(num_cores, MAX_HOGS))]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


_SUMMARY = re.compile(
    r"The store holds (\d+) scrapes of \S+ \((\d+) up\) and (\d+) request records.*?"
    r"from (\d+) stored observations.*?"
    r"The engine's own counters: (\d+) \(.*?\) finished requests .*? and (\d+) TTFT "
    r"observations",
)


def _check_summary(out: str) -> int:
    """The store matches the engine's own counters exactly; returns the finished requests."""
    summary = _SUMMARY.search(out.replace("\n", " "))
    assert summary, out
    scrapes, up, records, observations, finished, ttft_count = map(int, summary.groups())
    assert up >= 2 and scrapes >= up, out
    # Every request the engine finished has exactly one record, and the stored histograms
    # hold every TTFT observation: equal, not >=, with the engine's counter the reference.
    assert records == finished and observations == ttft_count, out
    assert "the store matches" in out and "mismatch" not in out, out
    return finished


@pytest.mark.slow
def test_demo_serves_traffic_reports_metrics_and_drains(tmp_path):
    port, collector_port = _free_port(), _free_port()
    with cpu_hogs():
        result = _demo(
            "--port", str(port), "--collector-port", str(collector_port),
            "--duration", "7", "--interval", "2", "--rate", "4",
            cwd=tmp_path,
        )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert f"http://127.0.0.1:{port}/metrics" in out
    rows = [line.split() for line in out.splitlines() if re.match(r"^\s+\d+\s+\d+\s", line)]
    assert len(rows) >= 2, out
    requests = [int(r[1]) for r in rows]
    assert requests == sorted(requests) and requests[-1] > 1  # requests were served
    assert all(r[3] != "-" for r in rows)  # TTFT p50 read from the histogram
    assert "drained and exited" in out
    # The collector stored the run (default store under ./.tailwatch), and what it holds
    # agrees with the engine's counters read at the end.
    finished = _check_summary(out)
    assert finished >= requests[-1]
    assert (tmp_path / ".tailwatch" / "tailwatch.db").exists()
    for gone in (port, collector_port):  # both processes are gone: their ports are free
        with socket.socket() as s:
            # NOTE: SO_REUSEADDR, because the server closing keep-alive connections leaves
            # them in TIME_WAIT; only a listening socket would still refuse the bind.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", gone))


@pytest.mark.slow
def test_ctrl_c_stops_traffic_then_engine_then_collector_and_loses_no_trace(tmp_path):
    """Ctrl-C in a terminal signals the whole foreground process group; the demo alone
    must get it and stop its children in order (engine drained and flushed before the
    collector), or the last spans are lost."""
    port, collector_port = _free_port(), _free_port()
    command = [sys.executable, "-m", "tailwatch.cli", "demo", "--port", str(port)]
    command += ["--collector-port", str(collector_port), "--duration", "600"]
    command += ["--interval", "2", "--rate", "4"]
    with cpu_hogs():
        demo = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=_env(), cwd=tmp_path, start_new_session=True,  # a terminal's group
        )  # fmt: skip
        # NOTE: should the demo hang before its first row, this ends it and the test fails.
        watchdog = threading.Timer(240, os.killpg, (demo.pid, signal.SIGKILL))
        watchdog.start()
        try:
            seen = []
            for line in demo.stdout:
                seen.append(line)
                if re.match(r"^\s+\d+\s+([1-9]\d*)\s", line):  # a row with requests served
                    break
            assert demo.poll() is None, "".join(seen)
            os.killpg(demo.pid, signal.SIGINT)  # what the terminal does
            out, _ = demo.communicate(timeout=180)
        finally:
            watchdog.cancel()
            if demo.poll() is None:
                os.killpg(demo.pid, signal.SIGKILL)
                demo.wait()
    out = "".join(seen) + out
    assert demo.returncode == 0, out
    assert "Traffic stopped" in out and "Traceback" not in out, out
    assert "engine server has drained and exited" in out, out
    assert "collector has drained and exited" in out, out
    finished = _check_summary(out)
    assert finished >= 1


def test_demo_reports_a_busy_port_in_one_line():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = _demo("--port", str(busy.getsockname()[1]), "--duration", "5")
    assert result.returncode == 2
    assert "error:" in result.stdout and "Traceback" not in result.stdout + result.stderr


def test_demo_refuses_a_non_positive_duration():
    result = _demo("--duration", "0")
    assert result.returncode == 2 and "must be > 0" in result.stdout + result.stderr


ENGINE_EXPOSITION = """\
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="tiny"} 3.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="tiny"} 5.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="tiny"} 1.0
vllm:request_success_total{engine="0",finished_reason="error",model_name="tiny"} 0.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="tiny"} 7.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="tiny"} 8.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="tiny"} 8.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="tiny"} 0.4
"""


@pytest.mark.parametrize(
    ("stored", "problems"),
    [
        (RunCounts({"stop": 3, "length": 5, "abort": 1}, 8), []),
        (
            RunCounts({"stop": 3, "length": 4, "abort": 1}, 8),
            ["length: engine 5, records 4"],
        ),
        (
            RunCounts({"stop": 3, "length": 5, "abort": 1, "": 1}, 7),
            ["no reason: engine 0, records 1", "TTFT observations: engine 8, stored 7"],
        ),
    ],
)
def test_the_summary_compares_records_by_finish_reason_with_the_engines_counters(stored, problems):
    families = {f.name: f for f in text_string_to_metric_families(ENGINE_EXPOSITION)}
    engine = engine_counts(families)
    assert engine == RunCounts({"stop": 3, "length": 5, "abort": 1, "error": 0}, 8)
    assert engine.num_finished == 9
    assert engine.describe() == "9 (abort 1, length 5, stop 3)"
    assert mismatches(engine, stored) == problems
