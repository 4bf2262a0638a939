"""``tailwatch replay``: a stored production window replayed against candidate knobs, its
figures next to what production saw, kept as a lab run of kind ``replay``.

The window's records become a trace (:mod:`loadgen.replay_trace`), the trace runs on a
target (:mod:`loadgen.replay_targets`), and both sides are summarized by
``loadgen.summary.summarize`` over the same requests (those the trace replays) and the
same time basis (the window's length; the replay's divided by ``speed``), so their
percentiles, attainment and goodput compare like for like. What production's records
cannot say, the production side leaves as None: they carry no inter-token gaps, so its
ITL is unknown (compare TPOT) and an ITL objective is refused.

The lab point (one per replay) holds in ``summary`` the replay's ``summarize`` dict at the
top level (what every lab point has), plus ``"production"`` (the same shape, from the
records), ``"difference"`` (replay against production, per figure), ``"replay"``
(``speed``, ``virtual_time``, ``run_seconds``, ``knobs_in_force``, ``timed_at``,
``replicas``, ``route``, ``per_replica``) and ``"client"`` (a bundled replay's client-side
figures); see docs/knob-lab.md, "Replay". The replicas and which request goes to which are
:mod:`loadgen.replay_fleet`'s.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from collectors.error_text import first_line
from collectors.store.lab_records import LabPoint, LabRun, LabRunKind, LabRunStatus
from collectors.store.protocols import LabStore, RequestReader
from loadgen.errors import WorkloadError
from loadgen.replay_compare import (
    cached_tokens,
    difference,
    production_results,
    samples,
    server_side,
)
from loadgen.replay_fleet import AS_RECORDED, Fleet, check_route, plan_fleet
from loadgen.replay_targets import (
    Progress,
    TargetRun,
    check_knobs,
    is_sim_engine,
    run_bundled,
    run_simulated,
    run_urls,
)
from loadgen.replay_trace import ReplayTrace, build_trace, read_window
from loadgen.summary import parse_slo, summarize
from slo.window import format_utc


@dataclass(frozen=True)
class ReplayPlan:
    """What to replay on: ``engine`` (``tiny``, ``sim:<model>@<gpu>``) or ``url`` (a running
    server, or a tuple of them: a fleet; their own knobs in force), the candidate
    ``knobs``, ``slo`` (``parse_slo``'s text), ``speed`` (arrivals this many times faster),
    the synthesized prompts' seed, and the fleet: ``replicas`` (None: as many as the
    window's records name; with URLs, the URLs are the replicas) and ``route``
    (``as-recorded`` or ``round-robin``, :mod:`loadgen.replay_fleet`)."""

    engine: str | None = "tiny"
    url: str | tuple[str, ...] | None = None
    knobs: Mapping[str, Any] = field(default_factory=dict)
    slo: str = ""
    speed: float = 1.0
    seed: int = 0
    name: str = ""
    replicas: int | None = None
    route: str = AS_RECORDED

    def check(self) -> None:
        """Refuse a plan that cannot run, before anything is read or written."""
        if (self.engine is None) == (self.url is None):
            raise WorkloadError("engine", "give exactly one of an engine and a URL")
        if isinstance(self.speed, bool) or not (math.isfinite(self.speed) and self.speed > 0):
            raise WorkloadError("speed", f"must be a finite number > 0, got {self.speed!r}")
        if self.url is not None and self.knobs:
            raise WorkloadError(
                "knob",
                "a running server (--url) replays under its own knobs; set them there "
                "(PATCH /admin/config) or replay on --engine",
            )
        if self.url is not None and not self.urls:
            raise WorkloadError("url", "give at least one server URL")
        repeated = sorted({u for u in self.urls if self.urls.count(u) > 1})
        if repeated:
            raise WorkloadError("url", f"{repeated[0]} given twice: one --url per server")
        if self.engine is not None:
            check_knobs(self.engine, self.knobs)
        check_route(self.route, self.replicas, url=self.url is not None, simulated=self.simulated)
        if parse_slo(self.slo).itl_seconds is not None:
            raise WorkloadError(
                "slo.itl",
                "production's records carry no inter-token gaps, so the window cannot be "
                "judged against an ITL objective; use tpot",
            )

    @property
    def urls(self) -> tuple[str, ...]:
        """The running servers (empty for an engine)."""
        return (self.url,) if isinstance(self.url, str) else tuple(self.url or ())

    @property
    def simulated(self) -> bool:
        return self.engine is not None and is_sim_engine(self.engine)

    @property
    def target(self) -> str:
        return self.engine if self.engine is not None else ", ".join(self.urls)

    def fleet(self, trace: ReplayTrace) -> Fleet:
        """The replicas ``trace`` replays on; ``WorkloadError`` when the route cannot place
        its requests on them (nothing is stored yet)."""
        return plan_fleet(
            trace,
            self.route,
            self.replicas,
            num_urls=len(self.urls) if self.url is not None else None,
            simulated=self.simulated,
        )


@dataclass(frozen=True)
class ReplayReport:
    run_id: int
    status: LabRunStatus
    trace: ReplayTrace
    production: dict[str, Any]
    replay: dict[str, Any]
    difference: dict[str, Any]
    knobs: Mapping[str, Any] | None
    fleet: Fleet | None = None
    per_replica: list[dict[str, Any]] = field(default_factory=list)


def load_trace(
    reader: RequestReader,
    start: float,
    end: float,
    *,
    tenant: str | None = None,
    seed: int = 0,
) -> ReplayTrace:
    """The window's trace; ``WorkloadError`` when it holds no record or none replayable."""
    if not end > start:
        raise WorkloadError("window", f"to ({end!r}) must be after from ({start!r})")
    records = read_window(reader, start, end, tenant=tenant)
    trace = build_trace(records, start, end, tenant=tenant, seed=seed)
    if not records:
        who = f" of tenant {tenant!r}" if tenant is not None else ""
        raise WorkloadError(
            "window", f"no request records{who} between {format_utc(start)} and {format_utc(end)}"
        )
    if not trace.requests:
        raise WorkloadError(
            "window",
            f"none of its {trace.num_records} request records can be replayed "
            f"({_reasons(trace.unreplayable)})",
        )
    return trace


def _reasons(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))


def run_trace(
    plan: ReplayPlan, trace: ReplayTrace, progress: Progress | None, fleet: Fleet | None = None
) -> TargetRun:
    """The trace on the plan's target, each request on its replica of ``fleet`` (default:
    the plan's fleet for the trace)."""
    fleet = fleet if fleet is not None else plan.fleet(trace)
    schedule = fleet.schedule(trace.schedule(plan.speed))
    if plan.url is not None:
        return run_urls(plan.urls, schedule, progress)
    assert plan.engine is not None
    run = run_simulated if plan.simulated else run_bundled
    return run(plan.engine, plan.knobs, schedule, progress, fleet.num_replicas)


def replay_window(
    reader: RequestReader,
    lab: LabStore,
    start: float,
    end: float,
    plan: ReplayPlan,
    *,
    tenant: str | None = None,
    progress: Progress | None = None,
    on_trace: Callable[[ReplayTrace], None] | None = None,
    clock: Callable[[], float] = time.time,
) -> ReplayReport:
    """Replay the window ``[start, end]`` (epoch seconds) as ``plan`` says and store it in
    ``lab``: the run first (status running), its one point, then its end (finished, or
    failed with the error, or interrupted). ``WorkloadError`` before anything is stored when
    the plan or the window cannot be replayed."""
    plan.check()
    objectives = parse_slo(plan.slo)
    trace = load_trace(reader, start, end, tenant=tenant, seed=plan.seed)
    fleet = plan.fleet(trace)
    if on_trace is not None:
        on_trace(trace)
    simulated = plan.simulated
    run_id = lab.create_lab_run(
        LabRun(
            kind=LabRunKind.REPLAY,
            name=plan.name or f"replay of {format_utc(start)}–{format_utc(end)} on {plan.target}",
            created_at=clock(),
            target=plan.target,
            simulated=simulated,
            knobs=dict(plan.knobs),
            workload={**trace.describe(), **fleet.describe()},
            rates=(len(trace.requests) / trace.window_seconds,),
            num_planned_points=1,
            window=(start, end),
        )
    )
    try:
        run = run_trace(plan, trace, progress, fleet)
    except BaseException as error:
        interrupted = isinstance(error, KeyboardInterrupt)
        status = LabRunStatus.INTERRUPTED if interrupted else LabRunStatus.FAILED
        lab.finish_lab_run(run_id, status, None if interrupted else first_line(error))
        raise
    production = summarize(production_results(trace), trace.window_seconds, objectives)
    results = server_side(run.results, run.server_records)
    replayed = summarize(results, trace.window_seconds / plan.speed, objectives)
    client = None
    if run.server_records is not None:
        client = summarize(run.results, trace.window_seconds / plan.speed, objectives)
    production["total_cached_tokens"] = cached_tokens(r.record for r in trace.requests)
    replayed["total_cached_tokens"] = run.total_cached_tokens
    diff = difference(replayed, production)
    per_replica = fleet.per_replica(trace, run.replica_cached_tokens)
    lab.add_lab_point(
        LabPoint(
            run_id=run_id,
            knob_value=None,
            rate=len(trace.requests) / trace.window_seconds,
            repeat=0,
            summary={
                **replayed,
                "production": production,
                "difference": diff,
                "replay": {
                    "speed": plan.speed,
                    "virtual_time": simulated,
                    "run_seconds": run.duration_seconds,
                    "knobs_in_force": dict(run.knobs) if run.knobs is not None else None,
                    "timed_at": "server"
                    if run.server_records is not None or simulated
                    else "client",
                    "replicas": fleet.num_replicas,
                    "route": fleet.route,
                    "per_replica": per_replica,
                },
                "client": client,
            },
            samples=samples(results, production_results(trace)),
            measured_at=clock(),
        )
    )
    status = LabRunStatus.INTERRUPTED if run.interrupted else LabRunStatus.FINISHED
    lab.finish_lab_run(run_id, status)
    return ReplayReport(
        run_id, status, trace, production, replayed, diff, run.knobs, fleet, per_replica
    )
