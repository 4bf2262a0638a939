"""An alert drill: a scenario against bundled replicas while a real ``tailwatch collect``
(scraping them from a file_sd targets file, receiving their traces, and evaluating the
alert rules itself: ``alerts.in_collector``) watches, then what the evaluator did, read
back from the store and checked against the scenario's ``expects``.

The collector is a separate process, as in production; the rules' windows and ``for:`` are
scaled (``alerts.window_scale``) to the compressed scenario's seconds. After the recovery
phase the replicas stay up, idle, until the alert resolves or ``settle_seconds`` pass, so a
resolution is the condition clearing, not the targets going away.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import yaml

from alerts import AlertState, Transition
from alerts.sql import alert_state_of
from collectors.store import Store
from loadgen.drill import DrillResult, check_real_time, run_drill
from loadgen.drill_report import (
    CLEAN_SUFFIX,
    AlertDrillReport,
    DrillTiming,
    build_report,
    clean_twin,
    history,
    report_json,
)
from loadgen.replicas import bundled_replicas, write_targets_file
from loadgen.scenario import Scenario
from tailwatch.collect_evaluation import evaluations_of
from tailwatch.processes import (
    CollectorClock,
    Stack,
    StartError,
    collector_config,
    free_port,
    tailwatch_command,
    targets_up,
)

#: How long the replicas may take to export their last spans to the collector after the
#: drill (they batch every 5 s, OpenTelemetry's default; the drill flushes them at once).
SPAN_FLUSH_TIMEOUT_SECONDS = 10.0
__all__ = [
    "CLEAN_SUFFIX",
    "AlertDrillReport",
    "DrillError",
    "DrillTiming",
    "clean_twin",
    "drill_collector_config",
    "read_report",
    "report_json",
    "run_alert_drill",
    "running_collector",
    "stored_transitions",
]


class DrillError(RuntimeError):
    """The drill could not run: the collector did not start or did not scrape in time."""


def drill_collector_config(db_url: str, targets: Path, timing: DrillTiming) -> dict:
    """The drill's collector: the replicas from the file_sd ``targets`` file, scraped and
    evaluated on ``timing``'s compressed clock (a scrape may take its whole interval)."""
    clock = CollectorClock(
        scrape_interval_seconds=timing.scrape_interval_seconds,
        scrape_timeout_seconds=timing.scrape_interval_seconds,
        window_scale=timing.window_scale,
        evaluation_interval_seconds=timing.evaluation_interval_seconds,
    )
    # NOTE: given unscaled; the collector scales every rule by window_scale
    rules = {"target-down": {"for": timing.target_down_for_seconds / timing.window_scale}}
    return collector_config(db_url, targets, clock, gpu="off", rules=rules)


@contextlib.contextmanager
def running_collector(config: Path, workdir: Path, port: int, num_targets: int) -> Iterator[str]:
    """``tailwatch collect --config config --listen 127.0.0.1:port``, run in ``workdir`` and
    logging to ``workdir/collector.log`` (:mod:`tailwatch.processes`); yields its base URL
    once ``GET /targets`` shows ``num_targets`` targets up, and stops it with SIGTERM (it
    writes what it holds first) on the way out."""
    base = f"http://127.0.0.1:{port}"
    command = tailwatch_command("collect", "--config", str(config.resolve()))
    command += ["--listen", f"127.0.0.1:{port}"]
    with Stack(workdir) as stack:
        try:
            stack.start(
                "collector", command, os.environ, targets_up(base, num_targets), cwd=workdir
            )
        except StartError as error:
            raise DrillError(str(error)) from None
        yield base


def run_alert_drill(
    scenario: Scenario, workdir: Path, timing: DrillTiming | None = None
) -> AlertDrillReport:
    """Run ``scenario`` (already compressed, if wanted) with a collector and evaluator
    attached; their store, config and logs stay in ``workdir`` (emptied first)."""
    timing = timing or DrillTiming()
    check_real_time(scenario)  # NOTE: before the workdir is emptied and replicas start
    # NOTE: absolute, since the collector runs in workdir and reads the paths written here
    workdir = workdir.resolve()
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    db_url = f"sqlite:///{workdir / 'store.db'}"
    targets = workdir / "targets.json"
    config = workdir / "tailwatch.yaml"
    config.write_text(yaml.safe_dump(drill_collector_config(db_url, targets, timing)), "utf-8")
    token = secrets.token_hex(16)
    # NOTE: replicas first, the collector second and stopped first: its first evaluation
    # already sees the targets (no metric-absent for the start-up), and its last one sees
    # them up (no target-down for the shutdown).
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    servers: list = []
    with bundled_replicas(
        scenario.replicas,
        scenario.engine,
        admin_token=token,
        otlp_endpoint=f"{base}/v1/traces",
        engine_servers=servers,
    ) as urls:
        write_targets_file(targets, urls, scenario.name)
        with running_collector(config, workdir, port, len(urls)):
            drill = asyncio.run(run_drill(scenario, urls, admin_token=token))
            for server in servers:
                if not server.tracer.flush(SPAN_FLUSH_TIMEOUT_SECONDS):
                    raise DrillError("the replicas' last spans did not reach the collector")
            _settle(db_url, scenario, drill, timing)
            # NOTE: from the collector's own /metrics, just before it stops (not its log).
            num_evaluations = evaluations_of(base)
    report = read_report(db_url, drill, timing)
    report = replace(report, evaluations=num_evaluations)
    figures = {**report_json(report), "verdict": drill.verdict()}
    (workdir / "drill.json").write_text(json.dumps(figures, indent=2, default=str) + "\n")
    return report


def _settle(db_url: str, scenario: Scenario, drill: DrillResult, timing: DrillTiming) -> None:
    """Keep the idle replicas up until the expected alert has resolved (or never fired),
    at most ``timing.settle_seconds``."""
    wanted = scenario.expects.alert
    begun = time.monotonic()
    deadline = begun + timing.settle_seconds
    store = Store(db_url, migrate=False)
    try:
        while time.monotonic() < deadline:
            episodes = {
                t.fingerprint: t.to_state
                for t in history(alert_state_of(store), drill.state.started_at, time.time())
                if t.alert.name == wanted and t.to_state in (AlertState.FIRING, AlertState.RESOLVED)
            }
            if all(state is AlertState.RESOLVED for state in episodes.values()) and (
                episodes or wanted is None
            ):
                return
            time.sleep(timing.evaluation_interval_seconds)
    finally:
        store.close()


def stored_transitions(db_url: str, since: float) -> tuple[Transition, ...]:
    """Every alert transition the store at ``db_url`` holds from ``since`` on."""
    store = Store(db_url, migrate=False)
    try:
        return history(alert_state_of(store), since, time.time())
    finally:
        store.close()


def read_report(db_url: str, drill: DrillResult, timing: DrillTiming) -> AlertDrillReport:
    """What the evaluator did during ``drill``, read back from the store at ``db_url``."""
    store = Store(db_url, migrate=False)
    try:
        return build_report(
            store, store, alert_state_of(store), drill, timing, time.time(), changes=store
        )
    finally:
        store.close()
