"""End to end: `tailwatch up` (engine, collector + evaluator, console) with a real
Alertmanager as its receiver; the demo's overload drill injected through the engine's admin
API; the alert fires, reaches the console's data and Alertmanager, triage names overload,
the alert resolves, and teardown leaves no process behind.

The rule clock is the demo's (windows at 0.05: 15 s; a 0.5 s evaluation, 0.25 s scrapes):
the rules compare the window with the baseline before it, so the baseline must hold a
window and a few steps of steady traffic with enough queued requests in each (evidence),
and the whole test is about two minutes."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import threading
import time
from pathlib import Path

import pytest
import yaml

from alerts import AlertState
from loadgen.drill import run_drill
from tailwatch.alert_drill import DrillTiming, read_report, stored_transitions
from tailwatch.up_demo import INCIDENTS, NORMAL_FAULTS, cycle_scenario
from tests.alerts.alertmanager_server import alertmanager, wait_for
from tests.services import free_port
from tests.up.test_up import STOP_TIMEOUT_SECONDS, _gone, _up, _wait_for_state

pytestmark = pytest.mark.timeout(420)
TIMING = DrillTiming(window_scale=0.05)
#: baseline, perturbation, recovery seconds: the demo's cycle, shortened (a baseline of a
#: 15 s window and four 3 s steps at least, with room to spare on a busy machine).
DURATIONS = (40.0, 20.0, 15.0)
ALERTMANAGER_CONFIG = """
route: {receiver: blackhole, group_wait: 1s, group_interval: 1s, repeat_interval: 1h}
receivers: [{name: blackhole}]
"""


def _config(tmp_path: Path, alertmanager_url: str) -> Path:
    config = {
        "database_url": f"sqlite:///{tmp_path / 'store.db'}",
        "collector": {"scrape_interval_seconds": TIMING.scrape_interval_seconds, "gpu": "off"},
        "alerts": {
            "window_scale": TIMING.window_scale,
            "evaluation_interval": TIMING.evaluation_interval_seconds,
            "in_collector": True,
            "notifiers": [{"alertmanager": alertmanager_url, "timeout_seconds": 5}],
        },
        # NOTE: none, on purpose: without the key `tailwatch up` would propose SLOs from the
        # drill's first traffic and restart the collector to alert on them, mid-drill.
        "slos": [],
    }
    path = tmp_path / "tailwatch.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_an_overload_drill_fires_reaches_alertmanager_is_triaged_and_resolves(tmp_path) -> None:
    overload = next(i for i in INCIDENTS if i.name == "overload")
    token = secrets.token_hex(16)
    os.environ["TAILWATCH_ADMIN_TOKEN"] = token  # inherited by `tailwatch up` and its engines
    try:
        with alertmanager(tmp_path, ALERTMANAGER_CONFIG) as am:
            ports = [free_port() for _ in range(3)]
            process = _up(
                tmp_path,
                *("--no-demo", "--replicas", "1", "--config", str(_config(tmp_path, am.url))),
                *("--engine-port", str(ports[0]), "--collector-port", str(ports[1])),
                *("--console-port", str(ports[2])),
            )
            try:
                state = _wait_for_state(process, tmp_path / ".tailwatch" / "up.json")
                _drill_and_check(state, overload, token, am)
            finally:
                process.send_signal(signal.SIGTERM)
                output, _ = process.communicate(timeout=STOP_TIMEOUT_SECONDS)
    finally:
        del os.environ["TAILWATCH_ADMIN_TOKEN"]
    assert process.returncode == 0, output
    assert all(_gone(pid) for pid in state["pids"].values()), (state["pids"], output)


def _drill_and_check(state: dict, overload, token: str, am) -> None:
    db_url = state["database_url"]
    normal = {**NORMAL_FAULTS, "max_num_seqs": 256}
    scenario = cycle_scenario(overload, 1, normal, DURATIONS)
    results = []
    drill = threading.Thread(
        target=lambda: results.append(
            asyncio.run(run_drill(scenario, state["urls"]["engines"], admin_token=token))
        )
    )
    drill.start()
    try:
        # While the queue is long, the collector's evaluator has told Alertmanager.
        received = wait_for(
            "queue-growth in Alertmanager",
            lambda: [a for a in am.alerts() if a["labels"]["alertname"] == "queue-growth"] or None,
            timeout_seconds=120,
        )
        assert received[0]["labels"]["severity"] == "page"
    finally:
        drill.join(timeout=180)
    assert results, "the drill did not finish"
    result = results[0]

    def resolved():
        transitions = stored_transitions(db_url, result.state.started_at)
        fired = {t.fingerprint for t in transitions if t.alert.name == "queue-growth"}
        done = {
            t.fingerprint
            for t in transitions
            if t.alert.name == "queue-growth" and t.to_state is AlertState.RESOLVED
        }
        return True if fired and fired <= done else None

    wait_for("queue-growth to resolve", resolved, timeout_seconds=120)
    report = read_report(db_url, result, TIMING)
    assert report.fired is not None
    assert report.cause_rank()[0] == 1, report.triage
    # The console reads the same incident.
    from console import data

    now = time.time()
    incidents = data.incident_list(db_url, result.state.started_at - 60, now, now)
    assert "queue-growth" in incidents.to_string()
