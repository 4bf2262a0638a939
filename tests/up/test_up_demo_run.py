"""`tailwatch up --demo` end to end, stopped as a terminal's Ctrl-C stops it: SIGINT to its
whole process group while the demo traffic runs (and CPU hogs keep the machine busy, so a
quiet machine cannot hide a race). `tailwatch up` alone acts on it: the traffic stops, the
console, then the engine (it drains and flushes its last spans), then the collector stop,
no process is left, and the end-of-run check finds every request the engine finished as
exactly one request record, and every TTFT observation in the stored histograms. Carried
over from the retired `tailwatch demo`'s tests (tests/test_demo.py)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tailwatch.up_demo import CYCLE_ENV
from tests.services import free_port
from tests.up.test_up import START_TIMEOUT_SECONDS, STOP_TIMEOUT_SECONDS, _env, _gone

#: Seconds a hog process spins at most, should the test that started it never kill it.
HOG_LIMIT_SECONDS = 300
#: Hogs at most (one per core up to this), so a many-core runner is not swamped.
MAX_HOGS = 16
#: Requests the engine finishes before the Ctrl-C (the demo sends about 2 a second).
MIN_FINISHED = 5

_SUMMARY = re.compile(
    r"The store holds (\d+) scrapes of \S+ \((\d+) up\) and (\d+) request records.*?"
    r"from (\d+) stored observations.*?"
    r"The engines' own counters: (\d+) \(.*?\) finished requests .*? and (\d+) TTFT "
    r"observations",
)


@contextlib.contextmanager
def cpu_hogs() -> Iterator[None]:
    """One busy-looping process per core for the duration of the block (each also stops
    by itself after HOG_LIMIT_SECONDS)."""
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


def check_summary(out: str) -> int:
    """The store matches the engine's own counters exactly; returns the finished requests."""
    found = _SUMMARY.search(out.replace("\n", " "))
    assert found, out
    scrapes, up, records, observations, finished, ttft_count = map(int, found.groups())
    assert up >= 2 and scrapes >= up, out
    # Every request the engine finished has exactly one record, and the stored histograms
    # hold every TTFT observation: equal, not >=, with the engine's counter the reference.
    assert records == finished and observations == ttft_count, out
    assert "the store matches" in out and "mismatch" not in out, out
    return finished


def _finished(engine_url: str) -> float:
    text = httpx.get(f"{engine_url}/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:request_success_total{")
    )


@pytest.mark.slow
def test_ctrl_c_stops_the_demo_in_order_and_the_store_matches_the_engine(tmp_path: Path) -> None:
    ports = [free_port() for _ in range(3)]
    command = [sys.executable, "-m", "tailwatch.cli", "up", "--demo", "--replicas", "1"]
    command += ["--engine-port", str(ports[0]), "--collector-port", str(ports[1])]
    command += ["--console-port", str(ports[2])]
    # NOTE: bounded phases; the first baseline (the SLO calibration's 90 s) outlasts the test.
    env = {**_env(), CYCLE_ENV: "10,20,10"}
    env.pop("TAILWATCH_ADMIN_TOKEN", None)
    up = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,  # a terminal's foreground group
    )  # fmt: skip
    state_path = tmp_path / ".tailwatch" / "up.json"
    pids: dict[str, int] = {}
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not state_path.exists():
            assert up.poll() is None, up.stdout.read()
            assert time.monotonic() < deadline, "tailwatch up --demo was not up in time"
            time.sleep(0.5)
        state = json.loads(state_path.read_text())
        pids = state["pids"]
        engine = state["urls"]["engines"][0]
        with cpu_hogs():
            deadline = time.monotonic() + START_TIMEOUT_SECONDS
            while _finished(engine) < MIN_FINISHED:
                assert up.poll() is None, up.stdout.read()
                assert time.monotonic() < deadline, "the demo sent no traffic"
                time.sleep(0.5)
            os.killpg(up.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
            out, _ = up.communicate(timeout=STOP_TIMEOUT_SECONDS)
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait()
    assert up.returncode == 0, out
    assert "stopping ..." in out and "Traceback" not in out, out
    stops = [line.split(":")[0] for line in out.splitlines() if ": stopped" in line]
    assert stops == ["console", "engine-0", "collector"], out
    # The check reads the store after the collector has written what it held.
    assert out.index("collector: stopped") < out.index("The store holds"), out
    assert check_summary(out) >= MIN_FINISHED
    assert all(_gone(pid) for pid in pids.values()), (pids, out)
    assert not state_path.exists()
