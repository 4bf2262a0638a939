"""The offline fast path computes exactly what the per-step path does.

Each workload runs twice on a virtual clock, ``fast=True`` (decode steps through
``engine.sim.fast_path``) and ``fast=False`` (every step ``LLMEngine.step()``), and the
two must agree exactly: every request's TTFT, ITLs, e2e, lengths and preemptions, every
step's time, and — with observers — every step's outputs (token ids, text, timings), the
step's figures, the scheduler's stats and the metrics' samples. The workloads cover what
the fast path handles differently: block boundaries, prefix-cache hits, chunked prompts
next to decodes, preemptions, admissions in a decode step. No wall-clock figure here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import EngineConfig
from engine.kv_cache import hash_block_tokens, update_block_hashes
from engine.metrics import EngineMetrics
from engine.request import Request
from engine.sampling_params import SamplingParams
from engine.sim import deferred_decodes
from engine.sim.offline import Arrival, OfflineRun, run_open_loop
from engine.sim.runner import pseudo_random_token, pseudo_random_tokens
from engine.sim.workload import RequestShape, poisson_schedule

SIM = "sim:llama-3.1-8b@h100"


def _shared_prefix_schedule(rate: float, duration: float, seed: int) -> list[Arrival]:
    """Poisson arrivals whose prompts start with one of two 512-token system prompts."""
    rng = random.Random(seed)
    prefixes = [tuple(rng.randrange(256) for _ in range(512)) for _ in range(2)]
    arrivals, t = [], rng.expovariate(rate)
    while t < duration:
        prompt = rng.choice(prefixes) + tuple(rng.randrange(256) for _ in range(40))
        arrivals.append(Arrival(t, prompt, rng.choice((16, 40, 64)), f"p-{len(arrivals)}"))
        t += rng.expovariate(rate)
    return arrivals


@dataclass(frozen=True)
class Workload:
    name: str
    config: EngineConfig
    arrivals: list[Arrival]


WORKLOADS = [
    # the benchmark's shape near its knee: admissions join decode steps
    Workload(
        "bench-shape",
        EngineConfig(model=SIM, max_model_len=4096),
        poisson_schedule(20, 2.5, [RequestShape(1024, 48)], seed=5),
    ),
    # 4000-token prompts chunked 512 at a time next to running decodes (Q13's mix)
    Workload(
        "chunked-prompts",
        EngineConfig(model=SIM, max_model_len=8192, max_num_batched_tokens=512),
        poisson_schedule(10, 2.5, [RequestShape(4000, 24, 0.3), RequestShape(256, 48, 0.7)], 1),
    ),
    # a pool of 120 blocks: decodes run out of blocks and preempt
    Workload(
        "preemptions",
        EngineConfig(model=SIM, max_model_len=1024, num_gpu_blocks=120),
        poisson_schedule(30, 1.5, [RequestShape(300, 80)], seed=2),
    ),
    # shared system prompts: prefix-cache hits at admission
    Workload(
        "prefix-hits",
        EngineConfig(model=SIM, max_model_len=1024, block_size=16),
        _shared_prefix_schedule(25, 2.0, seed=3),
    ),
    # other knobs: priority queue, no prefix caching, no chunking, small budget of seqs
    Workload(
        "priority-no-cache",
        EngineConfig(
            model=SIM,
            max_model_len=2048,
            scheduling_policy="priority",
            enable_prefix_caching=False,
            enable_chunked_prefill=False,
            max_num_seqs=8,
            block_size=32,
        ),
        poisson_schedule(15, 2.0, [RequestShape(700, 40), RequestShape(60, 70)], seed=4),
    ),
    # prompts shorter than a block or ending inside one: a decode fills a request's first
    # block, or one that holds prompt and output ids, hashed from the deferred draw
    Workload(
        "short-prompts",
        EngineConfig(model=SIM, max_model_len=1024, block_size=16),
        poisson_schedule(40, 1.5, [RequestShape(5, 40), RequestShape(21, 50)], seed=6),
    ),
]


def assert_same_run(fast: OfflineRun, slow: OfflineRun) -> None:
    assert fast.results == slow.results
    assert fast.step_seconds == slow.step_seconds
    assert (fast.num_steps, fast.simulated_seconds, fast.num_preemptions) == (
        slow.num_steps,
        slow.simulated_seconds,
        slow.num_preemptions,
    )


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: w.name)
def test_fast_path_results_equal_the_per_step_path(workload):
    fast = run_open_loop(workload.config, workload.arrivals)
    slow = run_open_loop(workload.config, workload.arrivals, fast=False)
    assert slow.num_fast_steps == 0
    assert fast.num_fast_steps > fast.num_steps // 2  # the comparison is not vacuous
    assert len(fast.results) == len(workload.arrivals)
    assert_same_run(fast, slow)
    if workload.name == "preemptions":
        assert slow.num_preemptions > 0


class _Recorder:
    """Every step's outputs and figures as an observer sees them (wall times left out),
    and the KV pool behind them: each running request's block table, the prefix index
    and (for a small pool) the free list in eviction order."""

    def __init__(self) -> None:
        self.steps: list[tuple] = []

    def on_step(self, engine, outputs, handles) -> None:
        step = engine.last_step
        self.steps.append(
            (
                tuple(outputs),
                step.step_index,
                step.num_prompt_tokens,
                step.num_generation_tokens,
                step.num_requests,
                step.timing.forward_seconds,
                engine.stats(),
                engine.clock(),
                self._pool(engine),
            )
        )

    @staticmethod
    def _pool(engine) -> tuple:
        kv_cache = engine.scheduler.kv_cache
        pool = kv_cache.pool
        tables = tuple(
            (r.request_id, tuple(kv_cache.get_block_ids(r.request_id)))
            for r in engine.scheduler.running
        )
        cached = tuple(sorted((b.block_id, h) for h, b in pool.cached_blocks.items()))
        free = tuple(pool.free_queue.block_ids()) if pool.num_blocks <= 1000 else ()
        return tables, cached, free, pool.num_free_blocks


def _samples(metrics: EngineMetrics) -> list[tuple]:
    return [
        (s.name, tuple(sorted(s.labels.items())), s.value)
        for family in metrics.registry.collect()
        for s in family.samples
        if not s.name.endswith("_created")  # NOTE: wall-clock creation times
    ]


@pytest.mark.parametrize(
    "workload", [w for w in WORKLOADS if w.name != "priority-no-cache"], ids=lambda w: w.name
)
def test_observers_see_the_same_steps(workload):
    runs = {}
    for fast in (True, False):
        recorder = _Recorder()
        metrics = EngineMetrics(SIM, workload.config.to_dict(), instance_id="pinned")
        run = run_open_loop(workload.config, workload.arrivals, [recorder, metrics], fast=fast)
        runs[fast] = (run, recorder.steps, _samples(metrics))
    (fast_run, fast_steps, fast_samples), (slow_run, slow_steps, slow_samples) = (
        runs[True],
        runs[False],
    )
    assert fast_run.num_fast_steps > 0
    assert_same_run(fast_run, slow_run)
    assert len(fast_steps) == len(slow_steps)
    for index, (fast_step, slow_step) in enumerate(zip(fast_steps, slow_steps, strict=True)):
        assert fast_step == slow_step, f"step {index} differs"
    assert fast_samples == slow_samples
    if workload.name == "prefix-hits":
        stats = slow_steps[-1][6]
        assert stats.prefix_cache_hits_tokens > 0


def test_the_comparison_tells_different_runs_apart():
    """``assert_same_run`` fails on runs that differ (here by one knob), so the equalities
    above are evidence, not a tautology."""
    workload = WORKLOADS[1]
    other = EngineConfig(model=SIM, max_model_len=8192, max_num_batched_tokens=1024)
    with pytest.raises(AssertionError):
        assert_same_run(
            run_open_loop(workload.config, workload.arrivals),
            run_open_loop(other, workload.arrivals),
        )


def _splitmix_token(key: int, position: int) -> int:
    """The sampled-token rule, written out independently of ``engine.sim.runner``."""
    mask = (1 << 64) - 1
    z = (key + (position + 1) * 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return 32 + (z ^ (z >> 31)) % 95


@pytest.mark.parametrize(
    ("key", "first", "count"),
    [
        (0, 0, 1),
        (1, 0, 17),
        ((1 << 64) - 1, 4095, 40),
        (0x1234_5678_9ABC_DEF0, 100_000, 3),
        # numpy's uint64 pass (from 32 tokens on), past 2**64 positions and a long run
        (0xDEAD_BEEF_0BAD_F00D, (1 << 70) + 5, 300),
        (7, 0, 4096),
    ],
)
def test_tokens_drawn_a_block_at_a_time_are_the_per_token_ones(key, first, count):
    expected = [_splitmix_token(key, p) for p in range(first, first + count)]
    assert pseudo_random_tokens(key, first, count) == expected
    assert [pseudo_random_token(key, p) for p in range(first, first + count)] == expected


@pytest.mark.parametrize("workload", WORKLOADS[:3], ids=lambda w: w.name)
def test_new_epochs_of_deferred_steps_change_nothing(workload, monkeypatch):
    """Every few deferred steps all decoders are brought up to date and every deferred
    figure is shifted (an hour-long run does this every 4096 steps)."""
    monkeypatch.setattr(deferred_decodes, "_MAX_DEFERRED_STEPS", 3)
    fast = run_open_loop(workload.config, workload.arrivals)
    assert fast.num_fast_steps > fast.num_steps // 2
    assert_same_run(fast, run_open_loop(workload.config, workload.arrivals, fast=False))


@settings(max_examples=40, deadline=None)
@given(
    tokens=st.lists(st.integers(0, 2**63 - 1), max_size=200),
    block_size=st.integers(1, 40),
    salt=st.one_of(st.none(), st.text(max_size=8)),
    num_known=st.integers(0, 5),
)
def test_block_hashes_made_together_are_the_chain_of_single_ones(
    tokens, block_size, salt, num_known
):
    """update_block_hashes converts a request's new blocks in one go (speed); each hash is
    still hash_block_tokens of its block, chained from the parent and salted first."""
    expected, parent = [], None
    for start in range(0, len(tokens) // block_size * block_size, block_size):
        parent = hash_block_tokens(
            parent, tokens[start : start + block_size], salt if not expected else None
        )
        expected.append(parent)
    request = Request("r", list(tokens), SamplingParams(), 0.0, cache_salt=salt)
    request.block_hashes.extend(expected[:num_known])  # some already hashed
    assert update_block_hashes(request, block_size) == expected
