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
import json
import secrets
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from alerts.model import Alert, AlertState
from alerts.state import Transition
from alerts.triage import TriageReport
from loadgen.drill import DrillResult, run_drill
from loadgen.replicas import bundled_replicas, write_targets_file
from loadgen.scenario import Phase, Scenario
from tailwatch.drill_collector import (
    DrillError,
    collector,
    collector_config,
    evaluations,
    free_port,
    wait_scraped,
)

if TYPE_CHECKING:
    from collectors.store import Store

#: How long the replicas may take to export their last spans to the collector after the
#: drill (they batch every 5 s, OpenTelemetry's default; the drill flushes them at once).
SPAN_FLUSH_TIMEOUT_SECONDS = 10.0
#: The name of a scenario's clean twin is the scenario's and this.
CLEAN_SUFFIX = "-clean"


@dataclass(frozen=True)
class DrillTiming:
    """The clock of a compressed drill: rule windows and ``for:`` times ``window_scale``
    (300 s windows become 3 s at 0.01), and the evaluation and scrape intervals."""

    window_scale: float = 0.01
    evaluation_interval_seconds: float = 0.5
    scrape_interval_seconds: float = 0.25
    settle_seconds: float = 8.0
    # NOTE: compression scales windows, not how fast a replica answers /metrics. Scaled
    # alone, target-down's 1m for: becomes 0.6 s: two or three scrapes timed out at 0.2 s
    # by a replica that shares a busy 2-core test machine with its load generator paged
    # a clean run in CI. So the drill gives a scrape the whole interval, and target-down
    # needs 10 s of failed scrapes (a minute of 15 s scrapes is 4, with seconds each): on a
    # slower 2-core CI machine the drill's own collector was starved and every scrape of
    # all four replicas timed out for 5 s at once, paging a clean scale-out run at 2 s and 4 s.
    target_down_for_seconds: float = 10.0


@dataclass(frozen=True)
class AlertDrillReport:
    """What the evaluator did during one drill, against the phase boundaries."""

    drill: DrillResult
    timing: DrillTiming
    transitions: tuple[Transition, ...]
    #: The expected alert's first firing at or after the perturbation's start (None: never).
    fired: Alert | None
    resolved_at_seconds: float | None
    triage: TriageReport | None
    #: How many times the collector's evaluator ran (from its last log line).
    evaluations: int = 0

    @property
    def perturbation_start(self) -> float:
        return self.drill.phase_start("perturbation")

    @property
    def recovery_start(self) -> float:
        return self.drill.phase_start("recovery")

    @property
    def pending_delay_seconds(self) -> float | None:
        """From the perturbation's start to when the alert's condition first held."""
        if self.fired is None or self.fired.active_at_seconds is None:
            return None
        return self.fired.active_at_seconds - self.perturbation_start

    @property
    def detection_delay_seconds(self) -> float | None:
        if self.fired is None or self.fired.started_at_seconds is None:
            return None
        return self.fired.started_at_seconds - self.perturbation_start

    def fired_names(self) -> list[str]:
        """Every alert that fired during the drill, by name, in order of first firing."""
        names = [t.alert.name for t in self.transitions if t.to_state is AlertState.FIRING]
        return list(dict.fromkeys(names))

    def cause_rank(self) -> tuple[int | None, float | None]:
        """The scenario's triage cause: its 1-based rank among the hypotheses and its score."""
        wanted = self.drill.scenario.expects.triage_cause
        if self.triage is None or wanted is None:
            return None, None
        for rank, hypothesis in enumerate(self.triage.hypotheses, start=1):
            if hypothesis.cause == wanted:
                return rank, hypothesis.score
        return None, None


def clean_twin(scenario: Scenario) -> Scenario:
    """``scenario`` with every phase carrying the baseline's traffic and knobs (its lengths
    and names kept): what the same fleet does when nothing goes wrong."""
    baseline = next(p for p in scenario.phases if p.name == "baseline")
    phases = tuple(p if p is baseline else _as_baseline(baseline, p) for p in scenario.phases)
    return replace(scenario, name=f"{scenario.name}{CLEAN_SUFFIX}", phases=phases)


def _as_baseline(baseline: Phase, phase: Phase) -> Phase:
    workloads = tuple(
        replace(w, duration_seconds=phase.duration_seconds) for w in baseline.workloads
    )
    return replace(
        baseline,
        name=phase.name,
        duration_seconds=phase.duration_seconds,
        workloads=workloads,
        admin=(),
    )


def run_alert_drill(
    scenario: Scenario, workdir: Path, timing: DrillTiming = DrillTiming()
) -> AlertDrillReport:
    """Run ``scenario`` (already compressed, if wanted) with a collector and evaluator
    attached; their store, config and logs stay in ``workdir`` (emptied first)."""
    # NOTE: absolute, since the collector runs in workdir and reads the paths written here
    workdir = workdir.resolve()
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    db_url = f"sqlite:///{workdir / 'store.db'}"
    targets = workdir / "targets.json"
    config = workdir / "tailwatch.yaml"
    config.write_text(yaml.safe_dump(collector_config(db_url, targets, timing)), "utf-8")
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
        with collector(config, workdir, port):
            wait_scraped(base, len(urls))
            drill = asyncio.run(run_drill(scenario, urls, admin_token=token))
            for server in servers:
                if not server.tracer.flush(SPAN_FLUSH_TIMEOUT_SECONDS):
                    raise DrillError("the replicas' last spans did not reach the collector")
            _settle(db_url, scenario, drill, timing)
    report = read_report(db_url, drill, timing)
    report = replace(report, evaluations=evaluations(workdir / "collector.log"))
    figures = {**report_json(report), "verdict": drill.verdict()}
    (workdir / "drill.json").write_text(json.dumps(figures, indent=2, default=str) + "\n")
    return report


def _settle(db_url: str, scenario: Scenario, drill: DrillResult, timing: DrillTiming) -> None:
    """Keep the idle replicas up until the expected alert has resolved (or never fired),
    at most ``timing.settle_seconds``."""
    from collectors.store import Store

    wanted = scenario.expects.alert
    begun = time.monotonic()
    deadline = begun + timing.settle_seconds
    store = Store(db_url, migrate=False)
    try:
        while time.monotonic() < deadline:
            episodes = {
                t.fingerprint: t.to_state
                for t in _history(store, drill.state.started_at)
                if t.alert.name == wanted and t.to_state in (AlertState.FIRING, AlertState.RESOLVED)
            }
            if all(state is AlertState.RESOLVED for state in episodes.values()) and (
                episodes or wanted is None
            ):
                return
            time.sleep(timing.evaluation_interval_seconds)
    finally:
        store.close()


def _history(store: Store, since: float) -> tuple[Transition, ...]:
    return tuple(store.alert_state.history(since, time.time() + 3600.0))


def stored_transitions(db_url: str, since: float) -> tuple[Transition, ...]:
    """Every alert transition the store at ``db_url`` holds from ``since`` on."""
    from collectors.store import Store

    store = Store(db_url, migrate=False)
    try:
        return _history(store, since)
    finally:
        store.close()


def read_report(db_url: str, drill: DrillResult, timing: DrillTiming) -> AlertDrillReport:
    """What the evaluator did during ``drill``, read back from the store at ``db_url``: the
    expected alert's first page in the perturbation, its resolution, and its triage."""
    from collectors.store import Store

    wanted = drill.scenario.expects.alert
    start = drill.phase_start("perturbation")
    store = Store(db_url, migrate=False)
    try:
        transitions = _history(store, drill.state.started_at)
        fired = next(
            (
                t.alert
                for t in transitions
                if t.alert.name == wanted
                and t.to_state is AlertState.FIRING
                and t.at_seconds >= start
            ),
            None,
        )
        if fired is None:
            return AlertDrillReport(drill, timing, transitions, None, None, None)
        resolved = next(
            (
                t.at_seconds
                for t in transitions
                if t.fingerprint == fired.fingerprint
                and t.to_state is AlertState.RESOLVED
                and t.at_seconds > (fired.started_at_seconds or start)
            ),
            None,
        )
        report = _triage(store, drill, fired, resolved, timing)
    finally:
        store.close()
    return AlertDrillReport(drill, timing, transitions, fired, resolved, report)


def _triage(
    store: Store,
    drill: DrillResult,
    fired: Alert,
    resolved: float | None,
    timing: DrillTiming,
) -> TriageReport:
    """Triage as ``tailwatch incident show`` would, on the drill's scaled windows."""
    from alerts.builtin_rules import builtin_rule_set
    from alerts.gather import gather
    from alerts.triage import triage
    from alerts.triage_windows import alert_triage_windows
    from collectors.replica_targets import replica_targets

    end = resolved if resolved is not None else drill.phase_end("recovery")
    start = fired.active_at_seconds if fired.active_at_seconds is not None else end
    rules, _ = builtin_rule_set()
    incident, baseline = alert_triage_windows(
        fired,
        start,
        end,
        rules.scaled(timing.window_scale),
        scale=timing.window_scale,
        state=store.alert_state,
    )
    mapping = replica_targets(store).unique()
    return triage(gather(store, store, incident, baseline, replica_targets=mapping))


def report_json(report: AlertDrillReport) -> dict:
    """The figures docs/alerts.md tabulates, as JSON."""
    rank, score = report.cause_rank()
    return {
        "scenario": report.drill.scenario.name,
        "clean": report.drill.scenario.name.endswith(CLEAN_SUFFIX),
        "alert": report.drill.scenario.expects.alert,
        "fired": report.fired is not None,
        "pending_delay_seconds": report.pending_delay_seconds,
        "detection_delay_seconds": report.detection_delay_seconds,
        "evaluations": report.evaluations,
        "evaluation_interval_seconds": report.timing.evaluation_interval_seconds,
        "resolved_after_recovery_start_seconds": (
            None
            if report.resolved_at_seconds is None
            else report.resolved_at_seconds - report.recovery_start
        ),
        "fired_alerts": report.fired_names(),
        "triage_verdict": None if report.triage is None else report.triage.verdict,
        "cause_rank": rank,
        "cause_score": score,
    }
