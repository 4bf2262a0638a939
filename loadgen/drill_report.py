"""What an alert drill found, read back from any store: the expected alert's page against the
scenario's phases, its resolution, and triage as ``tailwatch incident show`` gives it.

Both drills report through here: the real-time one (``tailwatch.alert_drill``: bundled
replicas and a ``tailwatch collect`` process) and the virtual one
(``loadgen.virtual.drill``: simulated replicas on one virtual clock). ``report_json`` is
the form ``tailwatch scenario drill`` prints and docs/alerts.md tabulates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from alerts import Alert, AlertState, AlertStateStore, Transition
from alerts.triage import TriageReport
from collectors.store.protocols import ChangeReader, MetricsReader, RequestReader
from loadgen.drill import DrillResult
from loadgen.scenario import Phase, Scenario

#: The name of a scenario's clean twin is the scenario's and this.
CLEAN_SUFFIX = "-clean"
#: How far past its end a drill's history is read (an alert may resolve after it).
_HISTORY_MARGIN_SECONDS = 3600.0


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
    #: How many times the collector's evaluator ran (the real-time drill reads its count
    #: from the collector's /metrics just before the collector stops).
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


def history(state: AlertStateStore, since: float, until: float) -> tuple[Transition, ...]:
    """Every alert transition ``state`` holds from ``since`` to well past ``until``."""
    return tuple(state.history(since, until + _HISTORY_MARGIN_SECONDS))


def build_report(
    metrics: MetricsReader,
    requests: RequestReader | None,
    state: AlertStateStore,
    drill: DrillResult,
    timing: DrillTiming,
    until: float,
    rules: Sequence | None = None,
    changes: ChangeReader | None = None,
) -> AlertDrillReport:
    """What the evaluator did during ``drill`` (its transitions up to ``until``, epoch
    seconds): the expected alert's first page in the perturbation, its resolution, and its
    triage over the incident window (``rules``: the unscaled rule set the drill ran; the
    built-ins when ``None``; ``changes``: the change events the drill's detector wrote)."""
    wanted = drill.scenario.expects.alert
    start = drill.phase_start("perturbation")
    transitions = history(state, drill.state.started_at, until)
    fired = next(
        (
            t.alert
            for t in transitions
            if t.alert.name == wanted and t.to_state is AlertState.FIRING and t.at_seconds >= start
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
    end = resolved if resolved is not None else drill.phase_end("recovery")
    report = triage_alert(metrics, requests, state, fired, end, timing.window_scale, rules, changes)
    return AlertDrillReport(drill, timing, transitions, fired, resolved, report)


def triage_alert(
    metrics: MetricsReader,
    requests: RequestReader | None,
    state: AlertStateStore,
    alert: Alert,
    end: float,
    window_scale: float,
    rules: Sequence | None = None,
    changes: ChangeReader | None = None,
) -> TriageReport:
    """Triage of ``alert`` as ``tailwatch incident show`` gives it, from when its condition
    first held to ``end``, on windows scaled as the rules were (``window_scale``; ``rules``
    unscaled, the built-ins when ``None``)."""
    from alerts.rules import builtin_rule_set
    from alerts.triage import triage_at

    rule_set = tuple(rules) if rules is not None else tuple(builtin_rule_set()[0])
    scaled = [r.scaled(window_scale) for r in rule_set]
    return triage_at(metrics, requests, state, alert, end, scaled, window_scale, changes)


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
