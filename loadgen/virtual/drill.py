"""A scenario drilled on the virtual fleet: the real evaluator and triage at virtual times.

``run_virtual_drill`` runs a scenario's phases (workloads, ``change``/``extra`` traffic,
``restart``, ``admin`` patches, ``active_replicas``) on
:class:`~loadgen.virtual.fleet.VirtualFleet`, with the virtual collector scraping every ``scrape_interval_seconds`` and the real
``alerts.evaluator.Evaluator`` (the built-in rules, scaled by ``window_scale`` as
``alerts.window_scale`` scales them) evaluating every ``evaluation_interval_seconds``, on
the scheduled ticks. When an alert fires, triage runs at once over what was stored by then,
as the on-call engineer paged at that moment would see it. After the last phase the idle
fleet is still scraped and evaluated until the expected alert resolves (at most
``settle_seconds``), as the real-time drill keeps its replicas up.

The report is the real-time drill's (``loadgen.drill_report``), so ``tailwatch scenario
drill --virtual`` prints what ``tailwatch scenario drill`` prints. A seed fixes everything:
the arrivals (each workload's seed is offset by it), the token draws and every id.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from prometheus_client.parser import text_string_to_metric_families

from alerts import Alert, AlertState, Evaluator
from alerts.rules import Rule, builtin_rule_set
from alerts.triage import TriageReport, triage_explainer
from collectors.changes import ChangeDetector, ChangeEvent, DetectorOptions
from engine.errors import ConfigError
from engine.sim.offline import VIRTUAL_EPOCH
from loadgen.drill import DrillResult, Samples
from loadgen.drill_report import AlertDrillReport, DrillTiming, build_report
from loadgen.errors import WorkloadError
from loadgen.runner import RunState
from loadgen.scenario import Phase, Scenario
from loadgen.virtual.collect import VirtualCollector, VirtualStore
from loadgen.virtual.fleet import VirtualFleet
from loadgen.virtual.gateway import VirtualGateway
from loadgen.virtual.replica import VirtualReplica, engine_settings, replica_extras
from loadgen.workload import build_schedule

#: The most change events a drill's result keeps (the newest).
MAX_CHANGES_KEPT = 100_000
#: Workload seeds are offset by the drill's seed times this (a prime), so seeds 0, 1, 2 …
#: give unrelated arrival streams while seed 0 is the scenario as written.
SEED_STRIDE = 1_000_003


@dataclass(frozen=True)
class VirtualTiming:
    """The virtual drill's clock, all virtual seconds: rule windows and ``for:`` times
    ``window_scale``, the scrape and evaluation intervals, every scenario phase times
    ``scenario_time_scale``, and how long the idle fleet is still watched after the last
    phase (``settle_seconds``).

    The defaults are a production setup at a twentieth: 5 m windows become 15 s, and
    scrapes and evaluations every 30 s (kube-prometheus's default interval) every 1.5 s;
    the built-in scenarios' 20 s phases become 40 s, so a baseline holds more than two
    windows and an incident a window, a ticket's ``for:`` and a few evaluations. A
    scenario may say otherwise in its ``virtual:`` block (:meth:`for_scenario`). NOTE:
    scrapes are most of a virtual run's CPU (prometheus_client's parser), so the interval
    is a tenth of a window, not less."""

    window_scale: float = 0.05
    evaluation_interval_seconds: float = 1.5
    scrape_interval_seconds: float = 1.5
    scenario_time_scale: float = 2.0
    settle_seconds: float = 30.0

    @classmethod
    def for_scenario(cls, scenario: Scenario) -> VirtualTiming:
        """The defaults with the scenario's own ``virtual:`` hints (``time_scale``,
        ``window_scale``; the intervals follow the window scale, at 30 s in production)."""
        hints = scenario.virtual
        scale = hints.get("window_scale", cls.window_scale)
        interval = 30.0 * scale
        return cls(
            window_scale=scale,
            evaluation_interval_seconds=interval,
            scrape_interval_seconds=interval,
            scenario_time_scale=hints.get("time_scale", cls.scenario_time_scale),
        )

    def drill_timing(self) -> DrillTiming:
        """The same clock in the real-time drill's terms (for its report)."""
        return DrillTiming(
            window_scale=self.window_scale,
            evaluation_interval_seconds=self.evaluation_interval_seconds,
            scrape_interval_seconds=self.scrape_interval_seconds,
            settle_seconds=self.settle_seconds,
        )


@dataclass(frozen=True)
class Page:
    """An alert that fired, and triage as it read at that moment."""

    alert: Alert
    at_seconds: float  # epoch (virtual)
    triage: TriageReport | None


@dataclass
class VirtualDrill:
    """One drill on the virtual fleet: the real-time drill's report, every page with
    its triage at page time, what the run cost, and the change events its detector
    recorded."""

    report: AlertDrillReport
    pages: list[Page] = field(default_factory=list)
    num_evaluations: int = 0
    num_scrapes: int = 0
    num_steps: int = 0
    num_requests: int = 0
    virtual_seconds: float = 0.0
    changes: tuple[ChangeEvent, ...] = ()


def seeded(scenario: Scenario, seed: int) -> Scenario:
    """``scenario`` with every workload's seed offset by ``seed`` (0: as written)."""
    if seed == 0:
        return scenario
    phases = tuple(
        replace(
            p, workloads=tuple(replace(w, seed=w.seed + seed * SEED_STRIDE) for w in p.workloads)
        )
        for p in scenario.phases
    )
    return replace(scenario, phases=phases)


def _ticks(interval: float, end: float) -> list[float]:
    count = math.floor(end / interval + 1e-9)
    return [i * interval for i in range(count + 1)]


def _samples(replica: VirtualReplica) -> Samples:
    """Every sample of the replica's ``/metrics`` in Prometheus text, as
    ``loadgen.admin.scrape`` reads it (the drill's signals are computed from these)."""
    body, _ = replica.metrics.render(None)
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body.decode("utf-8"))
        for s in family.samples
    }


class _Run:
    """The moving parts of one drill and the loop that drives them."""

    def __init__(
        self,
        scenario: Scenario,
        timing: VirtualTiming,
        seed: int,
        model: str | None,
        store: VirtualStore,
        rules: Sequence[Rule],
    ) -> None:
        config, limits = engine_settings(scenario.engine, model)
        extras = replica_extras(scenario.engine)
        try:
            replicas = [
                VirtualReplica(i, config, limits, seed=seed, extras=extras)
                for i in range(scenario.replicas)
            ]
        except ConfigError as error:
            raise WorkloadError("engine", str(error)) from None
        self.scenario, self.timing, self.store = scenario, timing, store
        self.fleet = VirtualFleet(replicas, scenario.routing)
        # NOTE: only where a phase sets one, so the other drills' stores hold no gateway target
        if scenario.has_gateway:
            self.fleet.gateway = VirtualGateway()
        self.collector = VirtualCollector(store, replicas, gateway=self.fleet.gateway)
        self.rules = tuple(rules)
        scaled = [r.scaled(timing.window_scale) for r in self.rules]
        # NOTE: the collector's change detector, on the evaluator's ticks and scaled windows
        self.detector = ChangeDetector(
            store.metrics,
            store.changes,
            store.requests,
            options=DetectorOptions().scaled(timing.window_scale),
            clock=lambda: VIRTUAL_EPOCH + self.fleet.now,
        )
        explain = triage_explainer(
            store.metrics,
            store.requests,
            store.alert_state,
            scaled,
            timing.window_scale,
            on_triage=lambda alert, at, report: self.pages.append(Page(alert, at, report)),
            changes=store.changes,
        )
        self.evaluator = Evaluator(
            scaled,
            store.metrics,
            store.alert_state,
            clock=lambda: VIRTUAL_EPOCH + self.fleet.now,
            explain=explain,
            watchers=[self.detector.detect],
        )
        self.pages: list[Page] = []
        self.num_evaluations = 0
        self.boundary_scrapes: list[list[Samples]] = []

    def scrape(self, at: float) -> None:
        self.collector.receive(self.fleet.take_log().finished)
        self.collector.scrape(at)

    def evaluate(self, at: float) -> None:
        """One evaluation; an alert that fires is triaged then (``self.pages``), grouped
        with the incident of its cause and scope (``alerts.grouping``)."""
        self.evaluator.evaluate_once(VIRTUAL_EPOCH + at)
        self.num_evaluations += 1

    def phase_start(self, phase: Phase) -> None:
        self.boundary_scrapes.append([_samples(r) for r in self.fleet.replicas])
        if phase.restart:
            # NOTE: the old engines' finished requests become spans first, with their ids
            self.collector.receive(self.fleet.take_log().finished)
        for index in phase.restart:
            self.collector.replace_replica(self.fleet.restart(index))
        if phase.active_replicas is not None:
            self.fleet.set_active(phase.active_replicas)
        if phase.gateway_delay_seconds is not None and self.fleet.gateway is not None:
            self.fleet.gateway.set_delay(phase.gateway_delay_seconds)
        for change in phase.admin:
            try:
                self.fleet.replicas[change.replica].patch(dict(change.patch))
            except ConfigError as error:
                raise WorkloadError(
                    f"phases[{phase.name}].admin[replica {change.replica}]", str(error)
                ) from None

    def run_to(self, end: float, until: Callable[[], bool] | None = None) -> None:
        """Scrape and evaluate on their ticks up to ``end`` (virtual seconds; both at a
        shared tick: scrape first, as a scrape stored before an evaluation is read by it),
        stopping early once ``until()`` holds."""
        t = self.timing
        start = self.fleet.now
        ticks = sorted(
            {x for x in _ticks(t.scrape_interval_seconds, end) if x >= start}
            | {x for x in _ticks(t.evaluation_interval_seconds, end) if x >= start}
        )
        scrapes = set(_ticks(t.scrape_interval_seconds, end))
        evaluations = set(_ticks(t.evaluation_interval_seconds, end))
        for tick in ticks:
            if tick <= self._last_tick:
                continue
            self.fleet.advance_to(tick)
            if tick in scrapes:
                self.scrape(tick)
            if tick in evaluations:
                self.evaluate(tick)
            self._last_tick = tick
            if until is not None and until():
                return
        self.fleet.advance_to(end)

    _last_tick = -math.inf


def run_virtual_drill(
    scenario: Scenario,
    timing: VirtualTiming | None = None,
    *,
    seed: int = 0,
    model: str | None = None,
    store: VirtualStore | None = None,
    rules: Sequence[Rule] | None = None,
) -> VirtualDrill:
    """Drill ``scenario`` (as written: not compressed) on the virtual fleet; see the module
    docstring. ``model`` replaces the scenario's engine model (a bundled one maps to
    ``loadgen.virtual.replica.DEFAULT_SIM_MODEL``); ``store`` defaults to the in-memory
    one; ``rules`` (unscaled) default to the built-in set. ``WorkloadError`` naming what is
    wrong for a scenario the fleet cannot run."""
    timing = timing or VirtualTiming.for_scenario(scenario)
    scenario = seeded(scenario, seed)
    if timing.scenario_time_scale != 1.0:
        scenario = scenario.scaled(timing.scenario_time_scale)
    store = store or VirtualStore.memory()
    rule_set = tuple(rules) if rules is not None else tuple(builtin_rule_set()[0])
    run = _Run(scenario, timing, seed, model, store, rule_set)
    bounds: list[tuple[str, float, float]] = []
    schedule = []
    offset = 0.0
    for phase in scenario.phases:
        schedule += build_schedule(phase.workloads, offset)
        bounds.append((phase.name, offset, offset + phase.duration_seconds))
        offset += phase.duration_seconds
    schedule.sort(key=lambda r: r.at_seconds)
    run.fleet.add_arrivals(replace(r, index=i) for i, r in enumerate(schedule))
    for phase, (_, start, end) in zip(scenario.phases, bounds, strict=True):
        run.run_to(start)
        run.phase_start(phase)
        run.run_to(end)
    wanted = scenario.expects.alert

    def settled() -> bool:
        states = {
            t.fingerprint: t.to_state
            for t in store.alert_state.history(VIRTUAL_EPOCH, math.inf)
            if t.alert.name == wanted and t.to_state in (AlertState.FIRING, AlertState.RESOLVED)
        }
        return all(s is AlertState.RESOLVED for s in states.values()) and (
            bool(states) or wanted is None
        )

    # NOTE: the stragglers finish and the idle fleet is still watched, as the real drill
    # keeps its replicas up until the alert resolves
    run.run_to(offset + timing.settle_seconds, until=settled)
    run.scrape(run.fleet.now)
    run.boundary_scrapes.append([_samples(r) for r in run.fleet.replicas])
    state = RunState(results=sorted(run.fleet.results, key=lambda r: r.index))
    state.started_at = VIRTUAL_EPOCH
    state.duration_seconds = offset
    state.num_finished = len(state.results)
    drill = DrillResult(
        scenario,
        [r.target for r in run.fleet.replicas],
        state,
        bounds,
        run.boundary_scrapes,
    )
    report = build_report(
        store.metrics,
        store.requests,
        store.alert_state,
        drill,
        timing.drill_timing(),
        VIRTUAL_EPOCH + run.fleet.now,
        rule_set,
        store.changes,
    )
    report = replace(report, evaluations=run.num_evaluations)
    return VirtualDrill(
        report,
        run.pages,
        run.num_evaluations,
        run.collector.num_scrapes,
        run.fleet.num_steps,
        len(state.results),
        run.fleet.now,
        tuple(store.changes.change_events(-math.inf, math.inf, limit=MAX_CHANGES_KEPT)),
    )
