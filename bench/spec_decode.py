"""Speculative decoding (n-gram): where it pays and where it turns into a slowdown (issue 25).

Two parts, each side by side in one run:

1. **The simulator, a load sweep** (``sim:llama-3.1-8b@h100``, virtual clock). N requests of
   a 512-token prompt and 128 output tokens all arrive at once (the batch is N), with and
   without ``num_speculative_tokens`` 4, at two acceptance rates (the share of each draft
   token the target keeps given the ones before it were kept: 0.7 for repetitive text such as
   code edits or quoting, 0.3 for prose). A step is priced for every token it verifies, so
   at a small batch, where a decode step is bound by reading the weights, verifying five
   tokens costs about what one does and speculation multiplies the tokens per step; at a
   large batch the step is bound by compute, every rejected draft is paid for, and
   speculation slows the engine down. The table gives output tokens per second and the
   spec/plain ratio, and the batch where the ratio first drops below 1.
2. **The torch engine on this CPU** (tiny preset), low load: one request at a time, repetitive
   prompts, greedy, 48 output tokens, plain and speculating engines in turns (three rounds,
   the median kept): wall seconds per output token, the ratio and the acceptance measured.
   The tiny model on a CPU is bound by per-step overhead, not by weights, which is the regime
   where speculation pays most.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from typing import NamedTuple

from bench._driver import setup_torch
from bench._report import print_table
from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams
from engine.sim.runner import VirtualClock

SIM = "sim:llama-3.1-8b@h100"
SPEC = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3}'
BATCHES = (1, 4, 16, 64, 128, 256, 512)
RATES = (0.7, 0.3)
PROMPT_TOKENS, OUTPUT_TOKENS = 512, 128
REAL_PROMPTS = (
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n",
    "the cat sat on the mat; the cat sat on the mat; the cat sat on the",
    "abcabcabcabcabcabcabcabcabcabc",
)
REAL_OUTPUT_TOKENS = 48
ROUNDS = 3


class SimPoint(NamedTuple):
    tokens_per_second: float
    accepted: int
    drafted: int


def _simulate(batch: int, rate: float | None) -> SimPoint:
    """N requests at once through the simulator; ``rate`` None: no speculation."""
    clock = VirtualClock()
    config = EngineConfig(
        model=SIM,
        speculative_config=None if rate is None else SPEC,
        max_num_seqs=512,
        max_num_batched_tokens=8192,
    )
    engine = LLMEngine(config, clock=clock)
    if rate is not None:
        assert engine.simulation is not None
        features = engine.simulation.features
        features.knobs = replace(features.knobs, spec_decode_acceptance_rate=rate)
    params = SamplingParams(max_tokens=OUTPUT_TOKENS, temperature=0.0, ignore_eos=True)
    for i in range(batch):
        engine.add_request([256, *([97 + i % 26] * (PROMPT_TOKENS - 1))], params)
    accepted = drafted = 0
    while engine.has_unfinished_requests():
        engine.step()
        stats = engine.last_step.spec_decoding
        if stats is not None:
            accepted += stats.num_accepted_tokens
            drafted += stats.num_draft_tokens
    return SimPoint(batch * OUTPUT_TOKENS / clock.now, accepted, drafted)


def _simulated_sweep() -> None:
    print(
        f"{SIM}, {PROMPT_TOKENS}-token prompts, {OUTPUT_TOKENS} output tokens, all arriving "
        "at once (the batch); k = 4; virtual clock"
    )
    rows = []
    crossover: dict[float, int | None] = dict.fromkeys(RATES)
    for batch in BATCHES:
        plain = _simulate(batch, None)
        row: list[object] = [batch, f"{plain.tokens_per_second:,.0f}"]
        for rate in RATES:
            spec = _simulate(batch, rate)
            ratio = spec.tokens_per_second / plain.tokens_per_second
            if ratio < 1 and crossover[rate] is None:
                crossover[rate] = batch
            row += [f"{spec.tokens_per_second:,.0f}", f"{ratio:.2f}x"]
        rows.append(row)
    headers = ["batch", "plain tok/s"]
    for rate in RATES:
        headers += [f"spec tok/s (accept {rate})", f"spec/plain ({rate})"]
    print_table(headers, rows)
    for rate, batch in crossover.items():
        where = f"a batch of {batch}" if batch is not None else f"no batch up to {BATCHES[-1]}"
        print(f"acceptance {rate}: speculation first slows the engine down at {where}")


class RealRun(NamedTuple):
    seconds: float
    token_ids: tuple[int, ...]
    accepted: int
    drafted: int


def _real_run(engine: LLMEngine, prompt: str) -> RealRun:
    """One request alone: wall seconds, its output tokens, drafts accepted and drafted."""
    params = SamplingParams(max_tokens=REAL_OUTPUT_TOKENS, temperature=0.0, ignore_eos=True)
    engine.add_request(prompt, params)
    accepted = drafted = 0
    tokens: list[int] = []
    started = time.perf_counter()
    while engine.has_unfinished_requests():
        for out in engine.step():
            tokens.extend(out.new_token_ids)
        stats = engine.last_step.spec_decoding
        if stats is not None:
            accepted += stats.num_accepted_tokens
            drafted += stats.num_draft_tokens
    return RealRun(time.perf_counter() - started, tuple(tokens), accepted, drafted)


def _real_low_load() -> None:
    threads = setup_torch()
    engines = {
        name: LLMEngine(EngineConfig(model="tiny", max_model_len=512, speculative_config=spec))
        for name, spec in (("plain", None), ("spec", SPEC))
    }
    for engine in engines.values():  # NOTE: warm both up before any timing
        _real_run(engine, REAL_PROMPTS[0])
    per_token: dict[str, list[float]] = {name: [] for name in engines}
    outputs: dict[str, set[tuple[tuple[int, ...], ...]]] = {name: set() for name in engines}
    accepted = drafted = 0
    for _ in range(ROUNDS):
        for name, engine in engines.items():
            runs = [_real_run(engine, prompt) for prompt in REAL_PROMPTS]
            per_token[name].append(
                sum(r.seconds for r in runs) / sum(len(r.token_ids) for r in runs)
            )
            outputs[name].add(tuple(r.token_ids for r in runs))
            if name == "spec":
                accepted += sum(r.accepted for r in runs)
                drafted += sum(r.drafted for r in runs)
    plain, spec = (statistics.median(per_token[n]) for n in ("plain", "spec"))
    print(
        f"\ntiny preset, CPU, {threads} torch thread(s); one request at a time, "
        f"{len(REAL_PROMPTS)} repetitive prompts, {REAL_OUTPUT_TOKENS} tokens each, greedy; "
        f"median of {ROUNDS} rounds taken in turns"
    )
    print_table(
        ("engine", "ms per output token", "drafts accepted"),
        [
            ("plain", f"{plain * 1000:.2f}", "-"),
            ("spec k=4", f"{spec * 1000:.2f}", f"{accepted}/{drafted} ({accepted / drafted:.0%})"),
        ],
    )
    same = outputs["plain"] == outputs["spec"] and len(outputs["spec"]) == 1
    print(
        f"speedup at low load, measured: {plain / spec:.2f}x; greedy outputs "
        f"{'identical' if same else 'DIFFERENT (a bug)'} with and without speculation"
    )


def main() -> None:
    _simulated_sweep()
    _real_low_load()
