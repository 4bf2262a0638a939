"""``tailwatch sweep``: rates × one knob's values, each point repeated, stored as it finishes.

Three targets, one loop. A simulated engine (``sim:<model>@<gpu>``) runs each point in
virtual time (``engine.sim.offline.run_open_loop``: seconds of CPU for minutes of traffic);
a bundled engine (``tiny``, or any other model the engine loads) is started in-process per
knob value and driven in real time; a running engine (``--url``) has the knob PATCHed through
``/admin/config`` before each value and put back as it was afterwards, also on an error or
Ctrl-C. Every point is the same open-loop workload a ``tailwatch load run`` sends (the same
schedule for every knob value and rate, re-seeded per repeat: repeats measure run-to-run
noise, values are compared on the same requests) and its ``summary`` is
``loadgen.summary.summarize``'s, so a point means what a load run means.

The run is written first (``num_planned_points``), each point as it is measured, with up to
``max_samples`` per-request TTFT, e2e and ITL figures (a seeded sample, not the first ones),
then its end: finished, failed (the error's text) or interrupted (the points so far kept).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from collectors.store.lab_records import LabPoint, LabRun, LabRunKind, LabRunStatus
from collectors.store.protocols import LabStore
from loadgen.errors import TargetError
from loadgen.record import RequestResult
from loadgen.summary import SLO_KEYS, summarize
from loadgen.workload import ScheduledRequest, Workload, build_schedule
from slo import Objectives

#: Per-request figures kept per point, of each of ttft_ms, e2e_ms and itl_ms.
MAX_SAMPLES = 5000
_SLO_KEY = {field: key for key, field in SLO_KEYS.items()}
#: Called after each stored point with (point, points done, points planned).
OnPoint = Callable[[LabPoint, int, int], None]


@dataclass(frozen=True)
class SweepPlan:
    """What to sweep, validated by the CLI. ``engine`` (a model: ``sim:...`` or ``tiny``) or
    ``url``; ``engine_knobs``: what every point shares (engine targets only);
    ``workload_options``: the traffic as the CLI took it (stored with the run)."""

    knob: str
    values: tuple[Any, ...]
    rates: tuple[float, ...]
    workload: Workload
    objectives: Objectives
    engine: str | None = None
    url: str | None = None
    repeats: int = 1
    engine_knobs: Mapping[str, Any] = field(default_factory=dict)
    workload_options: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""
    target_attainment: float = 0.9
    route: str = "/v1/completions"
    max_in_flight: int = 256
    admin_token: str | None = None
    max_samples: int = MAX_SAMPLES

    @property
    def num_planned_points(self) -> int:
        return len(self.values) * len(self.rates) * self.repeats

    @property
    def is_simulated_offline(self) -> bool:
        from engine.sim.target import is_simulated

        return self.engine is not None and is_simulated(self.engine)


@dataclass(frozen=True)
class SweepOutcome:
    run_id: int
    status: LabRunStatus
    points: tuple[LabPoint, ...]
    error: str | None = None


def run_lab_sweep(
    plan: SweepPlan,
    store: LabStore,
    on_point: OnPoint | None = None,
    clock: Callable[[], float] = time.time,
) -> SweepOutcome:
    """Run ``plan``, writing to ``store`` as it goes. Ctrl-C (``KeyboardInterrupt``) ends the
    run as interrupted, an error in a point (a prompt longer than ``max_model_len``, a server
    that stops answering) as failed with the error's first line; both return the points so
    far. A ``--url`` target's knob is put back in every case. An error before the run is
    created (``--url``'s knobs cannot be read) is raised."""
    target = _Target.open(plan)
    run = LabRun(
        kind=LabRunKind.SWEEP,
        name=plan.name or f"{plan.knob} {', '.join(map(str, plan.values))}",
        created_at=clock(),
        target=plan.url or plan.engine or "",
        simulated=target.simulated,
        knobs={k: v for k, v in target.knobs.items() if k != plan.knob},
        workload={
            **plan.workload_options,
            "slo_ms": {_SLO_KEY[k]: v * 1000.0 for k, v in plan.objectives.given()},
            "target_attainment": plan.target_attainment,
        },
        sweep_knob=plan.knob,
        knob_values=plan.values,
        rates=plan.rates,
        num_repeats=plan.repeats,
        num_planned_points=plan.num_planned_points,
    )
    run_id = store.create_lab_run(run)
    points: list[LabPoint] = []
    try:
        for value in plan.values:
            with target.at(value) as measure:
                for rate in plan.rates:
                    for repeat in range(plan.repeats):
                        summary, results = measure(_schedule(plan.workload, rate, repeat))
                        point = LabPoint(
                            run_id=run_id,
                            knob_value=value,
                            rate=rate,
                            repeat=repeat,
                            summary=summary,
                            samples=samples(results, plan.max_samples, f"{value}/{rate}/{repeat}"),
                            measured_at=clock(),
                        )
                        store.add_lab_point(point)
                        points.append(point)
                        if on_point is not None:
                            on_point(point, len(points), plan.num_planned_points)
    except KeyboardInterrupt:
        error = f"interrupted after {len(points)} of {plan.num_planned_points} points"
        store.finish_lab_run(run_id, LabRunStatus.INTERRUPTED, error)
        return SweepOutcome(run_id, LabRunStatus.INTERRUPTED, tuple(points), error)
    except Exception as exc:
        error = _error_text(exc)
        store.finish_lab_run(run_id, LabRunStatus.FAILED, error)
        return SweepOutcome(run_id, LabRunStatus.FAILED, tuple(points), error)
    except BaseException as exc:  # NOTE: SystemExit and the like: recorded, then let through
        store.finish_lab_run(run_id, LabRunStatus.FAILED, _error_text(exc))
        raise
    store.finish_lab_run(run_id, LabRunStatus.FINISHED)
    return SweepOutcome(run_id, LabRunStatus.FINISHED, tuple(points))


def _error_text(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0].replace("\x00", "")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _schedule(workload: Workload, rate: float, repeat: int) -> list[ScheduledRequest]:
    arrivals = replace(workload.arrivals, rate_per_second=rate)
    return build_schedule([replace(workload, arrivals=arrivals, seed=workload.seed + repeat)])


def samples(results: Sequence[RequestResult], limit: int, seed: str) -> dict[str, list[float]]:
    """Successful requests' ``ttft_ms``, ``e2e_ms`` and ``itl_ms`` (every gap), each a seeded
    sample of at most ``limit`` kept in request order (a bootstrap's input)."""
    ok = [r for r in results if r.succeeded]
    figures = {
        "ttft_ms": [r.ttft_seconds * 1000.0 for r in ok if r.ttft_seconds is not None],
        "e2e_ms": [r.e2e_seconds * 1000.0 for r in ok if r.e2e_seconds is not None],
        "itl_ms": [gap * 1000.0 for r in ok for gap in r.itl_seconds],
    }
    rng = random.Random(seed)
    for key, values in figures.items():
        if len(values) > limit:
            keep = sorted(rng.sample(range(len(values)), limit))
            figures[key] = [values[i] for i in keep]
    return figures


Measure = Callable[[list[ScheduledRequest]], tuple[dict[str, Any], list[RequestResult]]]


@dataclass
class _Target:
    """Where points are measured: ``at(value)`` gives a ``measure(schedule)`` with the knob
    at ``value`` (and undoes what it did on exit)."""

    plan: SweepPlan
    knobs: dict[str, Any]
    simulated: bool

    @classmethod
    def open(cls, plan: SweepPlan) -> _Target:
        if plan.url is not None:
            from loadgen.lab_knobs import check_values

            knobs = _run(_read_knobs(plan))
            if plan.knob not in knobs:
                raise TargetError(f"{plan.url}/admin/config has no knob {plan.knob!r}")
            check_values(str(knobs.get("model", "tiny")), _scheduler_knobs(knobs), plan.knob,
                         list(plan.values))  # fmt: skip
            return cls(plan, knobs, str(knobs.get("model", "")).startswith("sim:"))
        from engine.config import EngineConfig

        config = EngineConfig(model=plan.engine or "tiny", **plan.engine_knobs)
        return cls(plan, config.to_dict(), plan.engine is not None and "sim:" in plan.engine)

    @contextmanager
    def at(self, value: Any) -> Iterator[Measure]:
        plan = self.plan
        if plan.is_simulated_offline:
            yield self._offline(value)
        elif plan.url is None:
            from loadgen.replicas import bundled_replicas

            knobs = {**plan.engine_knobs, "model": plan.engine, plan.knob: value}
            with bundled_replicas(1, knobs) as urls:
                yield self._real_time(urls)
        else:
            yield from self._patched(value)

    def _patched(self, value: Any) -> Iterator[Measure]:
        plan = self.plan
        assert plan.url is not None
        from loadgen.admin import patch_knobs

        original = self.knobs[plan.knob]
        try:
            _run(_with_client(lambda c: patch_knobs(c, plan.url, {plan.knob: value},
                                                    plan.admin_token)))  # fmt: skip
            yield self._real_time([plan.url])
        finally:
            # NOTE: put back even on Ctrl-C or an error, in a fresh event loop of its own
            _run(_with_client(lambda c: patch_knobs(c, plan.url, {plan.knob: original},
                                                    plan.admin_token)))  # fmt: skip

    def _offline(self, value: Any) -> Measure:
        from engine.config import EngineConfig
        from engine.sim.offline import Arrival, run_open_loop

        plan = self.plan
        config = EngineConfig(**{**plan.engine_knobs, "model": plan.engine, plan.knob: value})

        def measure(schedule: list[ScheduledRequest]) -> tuple[dict[str, Any], list]:
            arrivals = [
                Arrival(r.at_seconds, r.prompt_token_ids, r.max_tokens, str(r.index))
                for r in schedule
            ]
            run = run_open_loop(config, arrivals)
            done = {int(r.request_id): r for r in run.results}
            results = [_offline_result(r, done.get(r.index)) for r in schedule]
            return summarize(results, max(run.simulated_seconds, 1e-9), plan.objectives), results

        return measure

    def _real_time(self, urls: list[str]) -> Measure:
        from loadgen.runner import run_schedule

        plan = self.plan

        def measure(schedule: list[ScheduledRequest]) -> tuple[dict[str, Any], list]:
            state = _run(
                run_schedule(urls, schedule, route=plan.route, max_in_flight=plan.max_in_flight)
            )
            duration = max(state.duration_seconds, 1e-9)
            return summarize(state.results, duration, plan.objectives), state.results

        return measure


def _offline_result(request: ScheduledRequest, result: Any) -> RequestResult:
    """A simulated request as the load generator's client would have recorded it."""
    base = RequestResult(
        index=request.index,
        scheduled_seconds=request.at_seconds,
        sent_seconds=request.at_seconds,
        prompt_tokens=len(request.prompt_token_ids),
        tenant=request.tenant,
        priority=request.priority,
        stream=request.stream,
    )
    if result is None:  # NOTE: run_open_loop finishes every request; kept for safety
        return replace(base, error="not finished by the simulation")
    return replace(
        base,
        ttft_seconds=result.ttft_seconds,
        e2e_seconds=result.e2e_seconds,
        itl_seconds=list(result.itl_seconds),
        output_tokens=result.num_output_tokens,
        status=200,
        finish_reason=result.finish_reason or "",
    )


def _scheduler_knobs(knobs: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("max_num_seqs", "max_num_batched_tokens", "max_model_len", "enable_chunked_prefill")
    return {k: knobs[k] for k in keep if k in knobs}


def _run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


async def _with_client(call: Callable[[Any], Any]) -> Any:
    import httpx

    async with httpx.AsyncClient() as client:
        return await call(client)


async def _read_knobs(plan: SweepPlan) -> dict[str, Any]:
    from loadgen.admin import ADMIN_TOKEN_ENV, read_knobs

    knobs = await _with_client(lambda c: read_knobs(c, plan.url, plan.admin_token))
    if knobs is None:
        raise TargetError(
            f"cannot read {plan.url}/admin/config: the admin API is off or the token is "
            f"missing or wrong (set {ADMIN_TOKEN_ENV} to the server's admin token)"
        )
    return knobs
