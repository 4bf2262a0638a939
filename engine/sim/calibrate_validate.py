"""Validate a calibration side by side: one held-out open-loop workload through the real
torch engine in real time and through the calibrated simulator in virtual time.

The workload is a seeded Poisson schedule whose prompt/output mix is none of the grid's
shapes. On the real engine each request is added when the wall clock reaches its arrival
time (with that scheduled time as its arrival, so TTFT includes any lateness in adding
it) and the engine steps while it has work, sleeping to the next arrival when idle;
TTFT and ITL come from the engine's own outputs, as a served request's would. The
simulator runs the same schedule with ``engine.sim.offline.run_open_loop``.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams
from engine.sim.offline import Arrival, RequestResult, run_open_loop
from engine.sim.workload import RequestShape, poisson_schedule

# NOTE: held out from the default grid: prompt lengths between its contexts and output
# lengths unlike its decode steps, so the mixed steps of serving are what is predicted.
# The middle class holds half the requests, so the TTFT median falls inside it, not on
# the cliff between two classes (where one request more or less flips it 4x).
VALIDATION_MIX = (
    RequestShape(48, 40, 0.3),
    RequestShape(320, 24, 0.5),
    RequestShape(900, 12, 0.2),
)
DEFAULT_RATE = 2.0
DEFAULT_DURATION_SECONDS = 30.0
# NOTE: a step that never returns would hang the real-time run; no step of the tiny
# engine takes a fraction of this.
MAX_IDLE_WAIT_SECONDS = 1.0


def validation_schedule(
    rate: float = DEFAULT_RATE,
    duration_seconds: float = DEFAULT_DURATION_SECONDS,
    seed: int = 1,
    mix: Sequence[RequestShape] = VALIDATION_MIX,
) -> list[Arrival]:
    return poisson_schedule(rate, duration_seconds, list(mix), seed=seed)


def _result(out) -> RequestResult:
    t = out.timings
    return RequestResult(
        request_id=out.request_id,
        arrival_time=t.arrival_time,
        num_prompt_tokens=out.num_prompt_tokens,
        num_output_tokens=out.num_output_tokens,
        ttft_seconds=t.ttft_seconds or 0.0,
        e2e_seconds=t.e2e_seconds or 0.0,
        itl_seconds=tuple(b - a for a, b in itertools.pairwise(t.token_times)),
        num_preemptions=out.num_preemptions,
        finish_reason=out.finish_reason,
    )


def run_real_time(
    engine: LLMEngine,
    arrivals: Sequence[Arrival],
    sleep: Callable[[float], None] = time.sleep,
    on_finish: Callable[[int], None] | None = None,
    on_step: Callable[[float, float], None] | None = None,
) -> list[RequestResult]:
    """Run ``arrivals`` open loop through ``engine`` on its own clock (see the module).
    ``on_step`` gets each step's wall and engine-thread CPU seconds."""
    clock = engine.clock
    schedule = sorted(arrivals, key=lambda a: a.time_seconds)
    start = clock()
    results: list[RequestResult] = []
    next_arrival = 0
    while next_arrival < len(schedule) or engine.has_unfinished_requests():
        # NOTE: an arrival due within a microsecond is due now: a sleep's rounding must
        # not leave the loop waiting on a gap the clock cannot resolve
        now = clock() - start + 1e-6
        while next_arrival < len(schedule) and schedule[next_arrival].time_seconds <= now:
            arrival = schedule[next_arrival]
            engine.add_request(
                list(arrival.prompt_token_ids),
                SamplingParams(max_tokens=arrival.max_tokens, temperature=0.0, ignore_eos=True),
                request_id=arrival.request_id,
                arrival_time=start + arrival.time_seconds,
            )
            next_arrival += 1
        if not engine.has_unfinished_requests():
            wait = schedule[next_arrival].time_seconds - (clock() - start)
            sleep(min(max(wait, 0.0), MAX_IDLE_WAIT_SECONDS))
            continue
        wall, cpu = time.perf_counter(), time.thread_time()
        outputs = engine.step()
        if on_step is not None:
            on_step(time.perf_counter() - wall, time.thread_time() - cpu)
        for out in outputs:
            if out.finished and out.timings is not None:
                results.append(_result(out))
                if on_finish is not None:
                    on_finish(len(results))
    return results


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0-1) by nearest rank; NaN for none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(frozen=True)
class LatencySummary:
    requests: int
    ttft_p50: float
    ttft_p99: float
    itl_p50: float
    itl_p99: float

    @classmethod
    def of(cls, results: Sequence[RequestResult]) -> LatencySummary:
        ttft = [r.ttft_seconds for r in results]
        itl = [x for r in results for x in r.itl_seconds]
        return cls(
            len(results),
            quantile(ttft, 0.5),
            quantile(ttft, 0.99),
            quantile(itl, 0.5),
            quantile(itl, 0.99),
        )


METRICS = ("ttft_p50", "ttft_p99", "itl_p50", "itl_p99")


@dataclass(frozen=True)
class Validation:
    rate: float
    duration_seconds: float
    real: LatencySummary
    simulated: LatencySummary
    tolerance: float = 0.15
    # NOTE: the validation's own steps priced by the calibrated model: the median of
    # predicted / measured - 1 against wall and engine-thread CPU time, and the median
    # wall / CPU ratio (above 1: the engine waited for a core other processes held)
    step_error_wall: float = math.nan
    step_error_cpu: float = math.nan
    wall_over_cpu: float = math.nan

    def relative_error(self, metric: str) -> float:
        real, simulated = getattr(self.real, metric), getattr(self.simulated, metric)
        return simulated / real - 1.0 if real > 0 else math.nan

    def misses(self) -> list[str]:
        return [m for m in METRICS if not abs(self.relative_error(m)) <= self.tolerance]

    def as_dict(self) -> dict:
        return {
            "rate_per_second": self.rate,
            "duration_seconds": self.duration_seconds,
            "mix": [s._asdict() for s in VALIDATION_MIX],
            "tolerance": self.tolerance,
            "real": {k: _finite(v) for k, v in self.real.__dict__.items()},
            "simulated": {k: _finite(v) for k, v in self.simulated.__dict__.items()},
            # NOTE: JSON has no NaN: an error with a zero real figure is null
            "relative_error": {m: _finite(self.relative_error(m)) for m in METRICS},
            "misses": self.misses(),
            "step_error_wall": _finite(self.step_error_wall),
            "step_error_cpu": _finite(self.step_error_cpu),
            "wall_over_cpu": _finite(self.wall_over_cpu),
        }


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def simulate(sim_config: EngineConfig, arrivals: Sequence[Arrival]) -> LatencySummary:
    return LatencySummary.of(run_open_loop(sim_config, arrivals).results)
