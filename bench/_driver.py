"""Open-loop driving of an engine: a request enters at its arrival time, whatever the engine is doing.

The driver steps the engine and, between steps, adds every request whose arrival time
has passed; when the engine is idle it jumps to the next arrival. Times are taken on
the client side (as ``vllm bench serve`` does): TTFT runs from the request's scheduled
arrival, so a request that arrived mid-step, or waited in the driver for a static
batch to drain, is charged for that wait.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice

import torch

from bench._workload import BOS_TOKEN_ID, RequestSpec
from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams
from slo import tpot_seconds

# NOTE: one intra-op thread by default. The bench machine has 2 cores shared with other
# work; with 2 threads, a competing process stalls torch's OpenMP barriers and decode
# steps at batch 64 measured 4-10x slower (median 173-223 ms vs 26-55 ms at 1 thread,
# same load). One thread makes runs comparable; override with TAILWATCH_BENCH_THREADS.
THREADS_ENV = "TAILWATCH_BENCH_THREADS"


def setup_torch() -> int:
    """Pin torch's intra-op threads for a benchmark; returns the count in use."""
    torch.set_num_threads(int(os.environ.get(THREADS_ENV, "1")))
    return torch.get_num_threads()


class EngineClock:
    """Seconds an engine has spent computing, plus the idle gaps it jumped over.

    Time moves only inside ``running()`` (around ``engine.step()``, at wall-clock
    speed) and through ``skip_to`` when the engine has nothing to do until the next
    arrival. Several engines, each with its own clock, can therefore be driven in
    turns from one process: each sees its own compute time only, and background noise
    on a shared machine falls on all of them alike instead of on whichever ran last.
    """

    def __init__(self) -> None:
        self._seconds = 0.0
        self._started: float | None = None

    def __call__(self) -> float:
        if self._started is None:
            return self._seconds
        return self._seconds + time.perf_counter() - self._started

    @contextmanager
    def running(self) -> Iterator[None]:
        self._started = time.perf_counter()
        try:
            yield
        finally:
            self._seconds += time.perf_counter() - self._started
            self._started = None

    def skip_to(self, when: float) -> None:
        self._seconds = max(self._seconds, when)


def make_engine(clock: EngineClock, **knobs: object) -> LLMEngine:
    """A ``tiny`` engine on CPU with ``knobs`` (EngineConfig names), warmed up."""
    engine = LLMEngine(EngineConfig(model="tiny", device="cpu", **knobs), clock=clock)
    warm_up(engine)
    return engine


def warm_up(engine: LLMEngine) -> None:
    """Run two short requests so first-call costs (allocator, kernels) are not measured."""
    params = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
    for i in range(2):
        # BOS, then ids 0..29 repeating: no random workload prompt shares a block with it
        engine.add_request([BOS_TOKEN_ID, *[(i + j) % 30 for j in range(40)]], params)
    while engine.has_unfinished_requests():
        engine.step()


@dataclass
class RequestRecord:
    """One request as the client saw it; times on the driver's clock, in seconds."""

    arrival_time: float
    num_prompt_tokens: int
    first_token_time: float | None = None
    finished_time: float | None = None
    num_output_tokens: int = 0
    num_cached_tokens: int = 0

    @property
    def ttft_seconds(self) -> float | None:
        if self.first_token_time is None:
            return None
        return self.first_token_time - self.arrival_time

    @property
    def tpot_seconds(self) -> float | None:
        """(e2e - ttft) / (output tokens - 1), as ``vllm bench serve``; 0 for one token."""
        if self.finished_time is None or self.first_token_time is None:
            return None  # NOTE: an unfinished request has no TPOT, even with one token
        e2e_seconds = self.finished_time - self.arrival_time
        ttft_seconds = self.first_token_time - self.arrival_time
        return tpot_seconds(e2e_seconds, ttft_seconds, self.num_output_tokens)


@dataclass(frozen=True)
class RunResult:
    records: tuple[RequestRecord, ...]
    # time 0 of the workload on the driver's clock
    start_time: float
    # from time 0 to the deadline, or to the last finish
    elapsed_seconds: float
    # output tokens returned by steps that ended within elapsed_seconds
    num_output_tokens: int
    num_steps: int
    # requests in the forward, averaged over steps
    mean_batch_size: float

    @property
    def output_tokens_per_second(self) -> float:
        """0 for a run that took no time (nothing arrived, or no step ended in the window)."""
        return self.num_output_tokens / self.elapsed_seconds if self.elapsed_seconds else 0.0


class OpenLoopRun:
    """Replays a workload against one engine on its ``EngineClock``; resumable.

    ``static_batch_size`` None is continuous batching: a request is added to the engine
    at the first step boundary after its arrival. Otherwise arrived requests wait in
    the driver, and up to ``static_batch_size`` of them are added together only when the
    engine has no request left. With ``pad_static_batches`` every member of such a
    batch keeps computing until the batch's longest member is done, as in a padded
    static batch; its client is answered after its own ``max_tokens`` and the rest is
    padding (not counted). The run ends at ``deadline_seconds`` after time 0 (a step
    ending later is not counted) or once every request has finished. ``on_step`` sees
    the engine after each counted step.
    """

    def __init__(
        self,
        engine: LLMEngine,
        workload: Sequence[RequestSpec],
        clock: EngineClock,
        *,
        static_batch_size: int | None = None,
        pad_static_batches: bool = False,
        deadline_seconds: float | None = None,
        on_step: Callable[[LLMEngine], None] | None = None,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.static_batch_size = static_batch_size
        self.pad_static_batches = pad_static_batches
        self.deadline_seconds = deadline_seconds
        self.on_step = on_step
        self.start_time = clock()
        self.records = {
            r.request_id: RequestRecord(
                self.start_time + r.arrival_seconds, len(r.prompt_token_ids)
            )
            for r in workload
        }
        self._max_tokens = {r.request_id: r.max_tokens for r in workload}
        self._not_arrived = deque(workload)
        self._arrived: deque[RequestSpec] = deque()
        self._end_time = self.start_time
        self._num_output_tokens = 0
        self._num_steps = 0
        self._batch_size_sum = 0
        self.is_done = False

    def advance(self, seconds: float | None = None) -> None:
        """Run until this run's clock has moved ``seconds`` further, or to the end (None)."""
        stop_at = None if seconds is None else self.clock() + seconds
        while not self.is_done and (stop_at is None or self.clock() < stop_at):
            self._tick()

    def result(self) -> RunResult:
        if not self.is_done:
            raise RuntimeError("the run has not finished; call advance() until is_done")
        return RunResult(
            records=tuple(self.records.values()),
            start_time=self.start_time,
            elapsed_seconds=self._end_time - self.start_time,
            num_output_tokens=self._num_output_tokens,
            num_steps=self._num_steps,
            mean_batch_size=self._batch_size_sum / self._num_steps if self._num_steps else 0.0,
        )

    def _tick(self) -> None:
        elapsed = self.clock() - self.start_time
        if self.deadline_seconds is not None and elapsed >= self.deadline_seconds:
            self._finish(self.start_time + self.deadline_seconds)
            return
        while self._not_arrived and self._not_arrived[0].arrival_seconds <= elapsed:
            self._arrived.append(self._not_arrived.popleft())
        self._admit()
        if self.engine.has_unfinished_requests():
            self._step()
        elif self._not_arrived:
            self.clock.skip_to(self.start_time + self._not_arrived[0].arrival_seconds)
        else:
            self._finish(self._end_time)

    def _admit(self) -> None:
        if self.static_batch_size is None:
            batch = list(self._arrived)
        elif self.engine.has_unfinished_requests():
            return
        else:
            batch = list(islice(self._arrived, self.static_batch_size))
        for _ in batch:
            self._arrived.popleft()
        longest = max((r.max_tokens for r in batch), default=0)
        for request in batch:
            max_tokens = request.max_tokens
            if self.pad_static_batches:
                limit = self.engine.config.max_model_len - len(request.prompt_token_ids)
                max_tokens = min(longest, limit)
            # greedy and ignore_eos: output lengths follow the workload exactly
            params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
            self.engine.add_request(request.prompt_token_ids, params, request_id=request.request_id)

    def _step(self) -> None:
        with self.clock.running():
            outputs = self.engine.step()
        now = self.clock()
        if self.deadline_seconds is not None and now - self.start_time > self.deadline_seconds:
            self._finish(self.start_time + self.deadline_seconds)
            return
        self._num_steps += 1
        self._batch_size_sum += self.engine.last_step.num_requests
        for output in outputs:
            record = self.records[output.request_id]
            if record.finished_time is not None:
                continue  # padding computed after the client was answered
            if output.new_token_ids and record.first_token_time is None:
                record.first_token_time = now
                record.num_cached_tokens = output.num_cached_tokens
            wanted = self._max_tokens[output.request_id]
            num_new = min(len(output.new_token_ids), wanted - record.num_output_tokens)
            record.num_output_tokens += num_new
            self._num_output_tokens += num_new
            if output.finished or record.num_output_tokens >= wanted:
                record.finished_time = now
        if self.on_step is not None:
            self.on_step(self.engine)
        self._end_time = now

    def _finish(self, end_time: float) -> None:
        self._end_time = end_time
        self.is_done = True


def run_interleaved(runs: Sequence[OpenLoopRun], slice_seconds: float = 1.0) -> list[RunResult]:
    """Advance ``runs`` in turns of ``slice_seconds`` of engine time until all are done.

    Each run keeps its own clock, so taking turns changes no run's figures; it spreads
    whatever else the machine is doing over all of them.
    """
    while not all(run.is_done for run in runs):
        for run in runs:
            run.advance(slice_seconds)
    return [run.result() for run in runs]
