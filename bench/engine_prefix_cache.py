"""Prefix caching: TTFT with a long shared system prompt, caching on vs off (issue 2, benchmark 4).

Every request is the same 1024-token system prompt (BOS + 1023 tokens) followed by a
short unique suffix. Two engines that differ only in ``enable_prefix_caching`` replay
the same open-loop workload, taking turns so machine noise falls on both alike.

The theoretical hit rate is computed from the workload alone: a request can reuse each
leading full block (``block_size`` tokens, chained from the start) that an earlier
request also has, except that the last prompt token is always computed, so at most
``(prompt_len - 1) // block_size`` blocks hit. It assumes every earlier request's
blocks are already computed and still cached when the request is admitted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from bench._driver import (
    EngineClock,
    OpenLoopRun,
    RunResult,
    make_engine,
    run_interleaved,
    setup_torch,
)
from bench._report import ms, nearest_rank, print_table
from bench._workload import LengthDistribution, RequestSpec, WorkloadSpec, describe, make_workload
from engine.llm_engine import LLMEngine

BLOCK_SIZE = 16
MAX_MODEL_LEN = 2048
SYSTEM_PROMPT_LEN = 1024  # BOS included
# NOTE: the rate is set at run time to LOAD_FRACTION of what the engine sustains with
# caching off on the machine running it (timed on a few requests first), so TTFT shows the
# prefill saved rather than an ever-growing queue (too fast) or an idle engine (too slow).
LOAD_FRACTION = 0.5
NUM_TIMED_REQUESTS = 4
WORKLOAD = WorkloadSpec(
    arrival_rate_per_second=2.0,  # replaced by the measured rate
    duration_seconds=30.0,
    shared_prefix_len=SYSTEM_PROMPT_LEN - 1,
    unique_prompt_len=LengthDistribution(median=32, sigma=0.6, minimum=1, maximum=256),
    output_len=LengthDistribution(median=16, sigma=0.5, minimum=2, maximum=64),
    max_model_len=MAX_MODEL_LEN,
    seed=0,
)


def main() -> None:
    threads = setup_torch()
    seconds_per_request = _seconds_per_request_caching_off()
    rate = LOAD_FRACTION / seconds_per_request
    spec = replace(WORKLOAD, arrival_rate_per_second=rate)
    workload = make_workload(spec)
    print(
        f"caching off, one request at a time takes {seconds_per_request * 1000:.0f} ms of "
        f"engine time here: offering {LOAD_FRACTION:.0%} of that rate, {rate:.2f} req/s"
    )
    if not workload:
        print(f"no samples: {rate:.2f} req/s for {spec.duration_seconds:g} s drew no request")
        return
    print(f"workload: {describe(workload, spec)}")
    print(
        f"tiny preset, CPU, {threads} torch thread(s); {SYSTEM_PROMPT_LEN}-token shared prefix, "
        f"block_size {BLOCK_SIZE}, max_model_len {MAX_MODEL_LEN}; every request run to the end"
    )
    runs, counters = [], []
    for enabled in (False, True):
        clock = EngineClock()
        engine = make_engine(
            clock,
            enable_prefix_caching=enabled,
            block_size=BLOCK_SIZE,
            max_model_len=MAX_MODEL_LEN,
        )
        counters.append(_PromptTokenCounter(engine))
        runs.append(OpenLoopRun(engine, workload, clock, on_step=counters[-1]))
    off, on = run_interleaved(runs)
    rows = [
        _row("off", off, counters[0].num_computed_tokens),
        _row("on", on, counters[1].num_computed_tokens),
    ]
    print_table(
        (
            "prefix caching",
            "TTFT mean ms",
            "TTFT p50 ms",
            "TTFT p90 ms",
            "TTFT p99 ms",
            "prompt tokens computed",
        ),
        rows,
    )
    theoretical = theoretical_hit_rate(workload, BLOCK_SIZE)
    hits, queries = counters[1].prefix_cache_tokens()
    if not _ttfts(off) or not _ttfts(on) or not queries:
        print("no samples: no request produced a first token (or no prefix lookups ran)")
        return
    print(
        f"TTFT p50 off/on = {_p(off, 50) / _p(on, 50):.1f}x, mean off/on = "
        f"{_mean_ttft(off) / _mean_ttft(on):.1f}x; hit rate measured {hits / queries:.1%} "
        f"({hits}/{queries} tokens) vs theoretical {theoretical:.1%}"
    )


def _seconds_per_request_caching_off() -> float:
    """Engine seconds per request of the workload's shape, caching off, one at a time:
    a bound on the off engine's capacity (batching overlaps only the short decodes)."""
    clock = EngineClock()
    engine = make_engine(
        clock, enable_prefix_caching=False, block_size=BLOCK_SIZE, max_model_len=MAX_MODEL_LEN
    )
    timed = [r._replace(arrival_seconds=0.0) for r in make_workload(WORKLOAD)]
    timed = timed[:NUM_TIMED_REQUESTS]
    run = OpenLoopRun(engine, timed, clock, static_batch_size=1)
    run.advance()
    return run.result().elapsed_seconds / len(timed)


def theoretical_hit_rate(workload: Sequence[RequestSpec], block_size: int) -> float:
    """Prompt tokens a perfect prefix cache serves / prompt tokens, in arrival order."""
    seen: set[tuple[int, ...]] = set()
    num_hit_tokens = num_prompt_tokens = 0
    for request in workload:
        prompt = request.prompt_token_ids
        max_hit_blocks = (len(prompt) - 1) // block_size
        num_full_blocks = len(prompt) // block_size
        prefixes = [prompt[: (i + 1) * block_size] for i in range(num_full_blocks)]
        num_hit_blocks = 0
        while num_hit_blocks < max_hit_blocks and prefixes[num_hit_blocks] in seen:
            num_hit_blocks += 1
        num_hit_tokens += num_hit_blocks * block_size
        num_prompt_tokens += len(prompt)
        seen.update(prefixes)
    return num_hit_tokens / num_prompt_tokens


class _PromptTokenCounter:
    """``on_step`` hook: prompt tokens computed (cache hits are not), and cache counters."""

    def __init__(self, engine: LLMEngine) -> None:
        self.engine = engine
        # the warm-up's lookups are not part of the workload
        self._stats_before = engine.stats()
        self.num_computed_tokens = 0

    def __call__(self, engine: LLMEngine) -> None:
        self.num_computed_tokens += engine.last_step.num_prompt_tokens

    def prefix_cache_tokens(self) -> tuple[int, int]:
        """(hit tokens, queried tokens) since construction."""
        now, before = self.engine.stats(), self._stats_before
        return (
            now.prefix_cache_hits_tokens - before.prefix_cache_hits_tokens,
            now.prefix_cache_queries_tokens - before.prefix_cache_queries_tokens,
        )


def _ttfts(result: RunResult) -> list[float]:
    return [r.ttft_seconds for r in result.records if r.ttft_seconds is not None]


def _p(result: RunResult, q: float) -> float:
    return nearest_rank(_ttfts(result), q)


def _mean_ttft(result: RunResult) -> float:
    """NaN when no request produced a first token (as ``nearest_rank`` of nothing)."""
    ttfts = _ttfts(result)
    return sum(ttfts) / len(ttfts) if ttfts else math.nan


def _row(label: str, result: RunResult, num_prompt_tokens: int) -> tuple[str, ...]:
    return (
        label,
        ms(_mean_ttft(result)),
        *(ms(_p(result, q)) for q in (50, 90, 99)),
        f"{num_prompt_tokens}",
    )
