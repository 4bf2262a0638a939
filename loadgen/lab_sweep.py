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

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from collectors.store.lab_records import LabPoint, LabRun, LabRunKind, LabRunStatus
from collectors.store.protocols import LabStore
from loadgen.lab_plan import MAX_SAMPLES, SweepPlan
from loadgen.lab_targets import Target
from loadgen.record import RequestResult
from loadgen.summary import SLO_KEYS
from loadgen.workload import ScheduledRequest, Workload, build_schedule

__all__ = ["MAX_SAMPLES", "SweepOutcome", "SweepPlan", "run_lab_sweep", "samples"]

_SLO_KEY = {field: key for key, field in SLO_KEYS.items()}
#: Called after each stored point with (point, points done, points planned).
OnPoint = Callable[[LabPoint, int, int], None]


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
    target = Target.open(plan)
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
