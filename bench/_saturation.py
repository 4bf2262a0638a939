"""Offered load that saturates an engine on whatever machine runs the benchmark.

A throughput comparison only compares capacities when every mode it compares has work
waiting for the whole window; an offered rate tuned on one machine caps a faster mode on
a faster machine, and the ratio becomes a bound. So the engine benchmarks queue every
request at t=0 (offline throughput, as ``vllm bench throughput`` measures it) and size
the number of requests from a decode step timed on this machine at the start of the run:
more than even the fastest mode could finish in the window. Whether each mode was in fact
saturated is checked afterwards (requests still never started at the deadline) and said.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

from bench._driver import EngineClock, RunResult, make_engine
from bench._workload import BOS_TOKEN_ID, RequestSpec, WorkloadSpec, make_workload
from engine.sampling_params import SamplingParams

# NOTE: the bound below ignores prefill, so the fastest mode consumes well under it; two
# times it again leaves a backlog at the deadline on a machine as fast as the timing said.
SAFETY_FACTOR = 2.0
NUM_TIMED_STEPS = 8


def decode_tokens_per_second_bound(batch_size: int, **knobs: object) -> float:
    """An upper bound on output tokens/s with ``batch_size`` running: ``batch_size`` over
    the fastest of a few all-decode steps of short requests (a step emits at most one token
    per running request, and a short context is the cheapest decode)."""
    engine = make_engine(EngineClock(), max_num_seqs=batch_size, **knobs)
    params = SamplingParams(max_tokens=NUM_TIMED_STEPS + 4, temperature=0.0, ignore_eos=True)
    for i in range(batch_size):
        engine.add_request([BOS_TOKEN_ID, *[(i + j) % 256 for j in range(15)]], params)
    fastest = math.inf
    while engine.has_unfinished_requests():
        started = time.perf_counter()
        engine.step()
        seconds = time.perf_counter() - started
        step = engine.last_step
        if step.num_prompt_tokens == 0 and step.num_requests == batch_size:
            fastest = min(fastest, seconds)
    if fastest == math.inf:
        # NOTE: e.g. a KV pool too small for the batch; a bound of 0 would size an empty workload.
        raise RuntimeError(
            f"no step ran {batch_size} requests all decoding (knobs {knobs}), so no decode "
            "bound could be timed; give the engine room for the whole batch"
        )
    return batch_size / fastest


def queued_at_zero(
    spec: WorkloadSpec, tokens_per_second_bound: float, window_seconds: float
) -> list[RequestSpec]:
    """Requests of ``spec``'s lengths, all arriving at t=0, with ``SAFETY_FACTOR`` times the
    output tokens a mode producing ``tokens_per_second_bound`` tokens/s consumes in the
    window, so such a mode still has some left at the end."""
    needed_tokens = SAFETY_FACTOR * tokens_per_second_bound * window_seconds
    # NOTE: the spec's own rate and duration only set how many requests are drawn; draw
    # more until their output tokens cover the need, then take the shortest prefix that does.
    rate = spec.arrival_rate_per_second
    while True:
        drawn = make_workload(replace(spec, arrival_rate_per_second=rate))
        if sum(r.max_tokens for r in drawn) >= needed_tokens:
            break
        rate *= 2
    chosen, total = [], 0
    for request in drawn:
        chosen.append(request._replace(arrival_seconds=0.0))
        total += request.max_tokens
        if total >= needed_tokens:
            break
    return chosen


def num_never_started(result: RunResult) -> int:
    """Requests without a first token at the end: a backlog means the mode had work
    waiting for the whole window (everything was queued at t=0)."""
    return sum(1 for r in result.records if r.first_token_time is None)
