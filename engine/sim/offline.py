"""Offline runs on a virtual clock: an open-loop arrival schedule through a simulated engine.

Requests are added at their scheduled arrival times; each step advances the clock by its
predicted time, and when the engine is idle the clock jumps to the next arrival. So an
hour of traffic costs only the CPU time of its steps, and every timestamp (TTFT, ITL,
queue time, the metrics' histograms) is on the simulated clock.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.llm_engine import LLMEngine
from engine.outputs import RequestTimings
from engine.sampling_params import SamplingParams
from engine.sim.fast_path import FastPath, FastStep
from engine.sim.runner import VirtualClock
from engine.sim.target import is_simulated

# NOTE: the virtual epoch the wall clock starts at (2026-01-01T00:00:00Z), so records of a
# simulated run never look like ones from the moment it was run.
VIRTUAL_EPOCH = 1767225600.0


@dataclass(frozen=True)
class Arrival:
    """One request of an open-loop schedule: when it arrives (seconds from the start)."""

    time_seconds: float
    prompt_token_ids: tuple[int, ...]
    max_tokens: int
    request_id: str


@dataclass(frozen=True)
class RequestResult:
    request_id: str
    arrival_time: float
    num_prompt_tokens: int
    num_output_tokens: int
    ttft_seconds: float
    e2e_seconds: float
    itl_seconds: tuple[float, ...]
    num_preemptions: int
    finish_reason: str | None


@dataclass(frozen=True)
class OfflineRun:
    results: tuple[RequestResult, ...]
    num_steps: int
    simulated_seconds: float
    num_preemptions: int = 0
    step_seconds: tuple[float, ...] = field(default=(), repr=False)
    # steps taken by the fast path (``engine.sim.fast_path``); 0 with ``fast=False``
    num_fast_steps: int = 0


def _result(
    request_id: str,
    t: RequestTimings,
    num_prompt: int,
    num_output: int,
    num_preemptions: int,
    finish_reason: str | None,
) -> RequestResult:
    times = t.token_times
    return RequestResult(
        request_id=request_id,
        arrival_time=t.arrival_time,
        num_prompt_tokens=num_prompt,
        num_output_tokens=num_output,
        ttft_seconds=t.ttft_seconds or 0.0,
        e2e_seconds=t.e2e_seconds or 0.0,
        itl_seconds=tuple(map(operator.sub, times[1:], times[:-1])),
        num_preemptions=num_preemptions,
        finish_reason=finish_reason,
    )


def _results_of(step: FastStep) -> list[RequestResult]:
    """The requests a step finished, from its outputs or (a fast step without outputs)
    from the finished requests themselves: the same figures either way."""
    results = [
        _result(
            out.request_id,
            out.timings,
            out.num_prompt_tokens,
            out.num_output_tokens,
            out.num_preemptions,
            out.finish_reason,
        )
        for out in step.outputs
        if out.finished and out.timings is not None
    ]
    results.extend(
        _result(
            r.request_id,
            RequestTimings.of(r),
            r.num_prompt_tokens,
            r.num_output_tokens,
            r.num_preemptions,
            r.status.finish_reason,
        )
        for r in step.finished
    )
    return results


def run_open_loop(
    config: EngineConfig,
    arrivals: Sequence[Arrival],
    observers: Sequence[object] = (),
    max_steps: int = 10_000_000,
    fast: bool = True,
) -> OfflineRun:
    """Run ``arrivals`` (any order) through a ``sim:`` engine on a virtual clock.

    ``observers`` get ``on_step(engine, outputs, {})`` after each step, as the serving
    loop's metrics and tracing do. Raises ``ConfigError`` for a non-simulated model (a
    torch engine's steps take real time, which a virtual clock cannot skip).

    ``fast`` (the default) takes decode steps through ``engine.sim.fast_path``: the same
    results, step times and observer outputs as ``fast=False`` (every step the engine's
    ``step()``), for a fraction of the CPU time. Without observers it makes no
    per-token outputs or text at all; with them, each step's outputs are the engine's.
    """
    if not is_simulated(config.model):
        raise ConfigError(f"model={config.model!r}: offline virtual-clock runs need a sim: model")
    clock = VirtualClock()
    engine = LLMEngine(config, clock=clock, wall_clock=lambda: VIRTUAL_EPOCH + clock.now)
    fast_path = FastPath(engine, emit_outputs=bool(observers)) if fast else None
    schedule = sorted(arrivals, key=lambda a: a.time_seconds)
    results: list[RequestResult] = []
    step_seconds: list[float] = []
    next_arrival = 0
    num_steps = 0
    # NOTE: SamplingParams is frozen: one per output length serves every request of it
    params_of: dict[int, SamplingParams] = {}
    while next_arrival < len(schedule) or engine.has_unfinished_requests():
        if not engine.has_unfinished_requests():
            clock.advance_to(schedule[next_arrival].time_seconds)
        while next_arrival < len(schedule) and schedule[next_arrival].time_seconds <= clock.now:
            arrival = schedule[next_arrival]
            params = params_of.get(arrival.max_tokens)
            if params is None:
                params = params_of[arrival.max_tokens] = SamplingParams(
                    max_tokens=arrival.max_tokens, temperature=0.0, ignore_eos=True
                )
            engine.add_request(
                list(arrival.prompt_token_ids),
                params,
                request_id=arrival.request_id,
                arrival_time=arrival.time_seconds,
                arrival_wall_time=VIRTUAL_EPOCH + arrival.time_seconds,
            )
            next_arrival += 1
        if num_steps >= max_steps:
            raise RuntimeError(f"still unfinished after max_steps={max_steps} steps")
        step = fast_path.step() if fast_path else FastStep(False, (), tuple(engine.step()))
        num_steps += 1
        step_seconds.append(engine.last_step.timing.forward_seconds)
        for observer in observers:
            observer.on_step(engine, list(step.outputs), {})  # type: ignore[attr-defined]
        if step.outputs or step.finished:
            results.extend(_results_of(step))
    return OfflineRun(
        results=tuple(results),
        num_steps=num_steps,
        simulated_seconds=clock.now,
        num_preemptions=engine.stats().num_preemptions_total,
        step_seconds=tuple(step_seconds),
        num_fast_steps=fast_path.num_fast_steps if fast_path else 0,
    )
