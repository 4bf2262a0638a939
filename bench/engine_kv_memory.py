"""KV memory efficiency: paged blocks vs contiguous reservations (issue 2, benchmark 3).

The chat workload is queued at t=0 (enough requests, sized from a decode step timed at
the start, that the waiting queue never empties within the window on any machine), into
a KV pool of a fixed size, so the pool is the limit on concurrency. After every step we sample the
running requests and compare, on the same requests at the same moment:

- live tokens: tokens whose K/V are in the cache (``num_computed_tokens``);
- paged: what the engine actually holds, whole blocks of ``block_size`` tokens;
- contiguous, max_model_len: one max_model_len slab reserved per request (how serving
  stacks worked before paging: the length a request reaches is unknown up front);
- contiguous, prompt + max_tokens: a slab sized to what the request could reach.

Efficiency is live / allocated. "Requests that fit" is the paged engine's observed
concurrency in the pool, against the budget divided by each contiguous reservation.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from bench._driver import EngineClock, OpenLoopRun, make_engine, setup_torch
from bench._report import print_table
from bench._saturation import decode_tokens_per_second_bound, queued_at_zero
from bench._workload import CHAT_MAX_MODEL_LEN, CHAT_WORKLOAD
from engine.llm_engine import LLMEngine

MAX_MODEL_LEN = CHAT_MAX_MODEL_LEN
BLOCK_SIZE = 16
# 16 max_model_len slabs' worth: 32 MiB of K/V for the tiny preset
NUM_BLOCKS = 16 * MAX_MODEL_LEN // BLOCK_SIZE
DURATION_SECONDS = 10.0
FULL_POOL_FRACTION = 0.9
MAX_NUM_SEQS = 256


@dataclass(frozen=True)
class Sample:
    """The running requests after one step, in tokens."""

    num_running: int
    live_tokens: int
    paged_tokens: int
    # sum over running requests of prompt + max_tokens
    reachable_tokens: int

    @property
    def contiguous_tokens(self) -> int:
        return self.num_running * MAX_MODEL_LEN


def main() -> None:
    threads = setup_torch()
    knobs = {"max_model_len": MAX_MODEL_LEN, "num_gpu_blocks": NUM_BLOCKS, "block_size": BLOCK_SIZE}
    bound = decode_tokens_per_second_bound(MAX_NUM_SEQS, **knobs)
    workload = queued_at_zero(CHAT_WORKLOAD, bound, DURATION_SECONDS)
    budget_tokens = NUM_BLOCKS * BLOCK_SIZE
    print(
        f"workload: {len(workload)} chat requests queued at t=0 (seed {CHAT_WORKLOAD.seed}; "
        f"sized from a decode bound of {bound:.0f} tok/s here)"
    )
    print(
        f"tiny preset, CPU, {threads} torch thread(s); KV pool {NUM_BLOCKS} blocks x "
        f"{BLOCK_SIZE} = {budget_tokens} tokens, max_model_len {MAX_MODEL_LEN}, "
        f"max_num_seqs {MAX_NUM_SEQS}; sampled after every step for {DURATION_SECONDS:g} s "
        "of engine time"
    )
    reachable = {r.request_id: len(r.prompt_token_ids) + r.max_tokens for r in workload}
    samples: list[Sample] = []

    def sample(engine: LLMEngine) -> None:
        running = engine.scheduler.running
        kv_cache = engine.scheduler.kv_cache
        samples.append(
            Sample(
                num_running=len(running),
                live_tokens=sum(r.num_computed_tokens for r in running),
                paged_tokens=BLOCK_SIZE
                * sum(len(kv_cache.get_block_ids(r.request_id)) for r in running),
                reachable_tokens=sum(reachable[r.request_id] for r in running),
            )
        )

    clock = EngineClock()
    engine = make_engine(clock, max_num_seqs=MAX_NUM_SEQS, **knobs)
    preemptions_before = engine.stats().num_preemptions_total
    run = OpenLoopRun(engine, workload, clock, deadline_seconds=DURATION_SECONDS, on_step=sample)
    run.advance()
    samples = [s for s in samples if s.num_running]
    # concurrency while the pool is (nearly) full: what the budget holds
    num_running = [
        s.num_running for s in samples if s.paged_tokens >= FULL_POOL_FRACTION * budget_tokens
    ]
    if not samples or not num_running:
        print(
            "no samples: "
            + (
                "no step ran with a request running"
                if not samples
                else f"the pool never reached {FULL_POOL_FRACTION:.0%} full in {len(samples)} "
                "steps, so it did not bound concurrency (raise the queued requests)"
            )
        )
        return
    if run.result().records and all(r.first_token_time is not None for r in run.result().records):
        print("note: every queued request started: the queue emptied within the window")
    peak = max(samples, key=lambda s: (s.num_running, s.live_tokens))
    mean_reachable = statistics.mean(reachable.values())

    def efficiency(allocated: str) -> tuple[str, str]:
        mean = statistics.mean(s.live_tokens / getattr(s, allocated) for s in samples)
        return f"{mean:.1%}", f"{peak.live_tokens / getattr(peak, allocated):.1%}"

    print_table(
        ("allocation", "live/allocated mean", "at peak concurrency", "requests that fit"),
        (
            (
                f"paged, block_size {BLOCK_SIZE}",
                *efficiency("paged_tokens"),
                f"{peak.num_running} peak, {statistics.mean(num_running):.1f} mean "
                f"(observed, pool >= {FULL_POOL_FRACTION:.0%} full)",
            ),
            (
                "contiguous, max_model_len",
                *efficiency("contiguous_tokens"),
                f"{budget_tokens // MAX_MODEL_LEN}",
            ),
            (
                "contiguous, prompt + max_tokens",
                *efficiency("reachable_tokens"),
                f"~{budget_tokens / mean_reachable:.0f} (budget / mean reservation)",
            ),
        ),
    )
    peak_live = peak.live_tokens
    print(
        f"{len(samples)} steps sampled; at peak concurrency {peak.num_running} requests hold "
        f"{peak_live} live tokens in {peak.paged_tokens} paged slots (pool {budget_tokens}); "
        f"contiguous max_model_len slabs for them would take {peak.contiguous_tokens} "
        f"({peak.contiguous_tokens / budget_tokens:.1f}x the pool); "
        f"paged waste per request {(peak.paged_tokens - peak_live) / peak.num_running:.1f} "
        f"tokens (< block_size); preemptions "
        f"{engine.stats().num_preemptions_total - preemptions_before}"
    )
    print(
        f"requests that fit, paged vs contiguous max_model_len: "
        f"{peak.num_running / (budget_tokens // MAX_MODEL_LEN):.1f}x at peak, "
        f"{statistics.mean(num_running) / (budget_tokens // MAX_MODEL_LEN):.1f}x on average"
    )
