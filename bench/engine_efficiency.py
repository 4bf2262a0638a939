"""Where a decode step's time goes at a saturated batch (issue 2, benchmark 2).

N requests with long-tailed prompt lengths are admitted together and prefilled; then
every step decodes all N at once. Over many such steps we split ``step_seconds``
into the runner's phases (``StepTiming``): building inputs (prepare), the model
forward (which includes attention planning and the logits), sampling, and the rest of
``LLMEngine.step`` outside the runner (scheduling, block accounting, detokenization,
stop checks, building outputs). The target is the forward's share at N = 64; the
smaller batches show how the fixed per-step overhead weighs when a batch is thin.

The last column is the batch's longest context over its mean context, averaged over
the measured steps: decode attention that pads every request to the longest context
(as ``paged_attention`` does today, in one gather) reads that many key slots per key
it needs, and that work is inside "forward".
"""

from __future__ import annotations

import statistics
from dataclasses import replace

from bench._driver import EngineClock, make_engine, setup_torch
from bench._report import print_table, verdict
from bench._workload import CHAT_MAX_MODEL_LEN, CHAT_WORKLOAD, make_workload
from engine.llm_engine import StepStats
from engine.sampling_params import SamplingParams

BATCH_SIZES = (1, 16, 64)
TARGET_BATCH_SIZE = 64
TARGET_FORWARD_FRACTION = 0.75
NUM_SKIPPED_STEPS = 5
NUM_MEASURED_STEPS = 150
# A batch's prompts are prefilled over several chunked steps, and the first requests
# start decoding before the last are prefilled; this margin keeps them all running.
NUM_MARGIN_TOKENS = 64
MAX_MODEL_LEN = CHAT_MAX_MODEL_LEN
BLOCK_SIZE = 16
# The chat workload's prompt lengths (arrival times are not used here), leaving room
# for the measured outputs within max_model_len.
PROMPTS = replace(
    CHAT_WORKLOAD,
    arrival_rate_per_second=200.0,
    max_model_len=MAX_MODEL_LEN - NUM_SKIPPED_STEPS - NUM_MEASURED_STEPS - NUM_MARGIN_TOKENS,
    seed=1,
)


def main() -> None:
    threads = setup_torch()
    print(
        f"tiny preset, CPU, {threads} torch thread(s); {NUM_MEASURED_STEPS} all-decode steps "
        f"per batch size after {NUM_SKIPPED_STEPS} skipped; long-tailed prompt lengths "
        f"(lognormal, median {PROMPTS.unique_prompt_len.median}, clipped to "
        f"{PROMPTS.unique_prompt_len.maximum})"
    )
    rows = []
    forward_fraction: dict[int, float] = {}
    for batch_size in BATCH_SIZES:
        steps, skew = _measure(batch_size)
        total = sum(s.step_seconds for s in steps)
        prepare = sum(s.timing.prepare_seconds for s in steps)
        forward = sum(s.timing.forward_seconds for s in steps)
        sample = sum(s.timing.sample_seconds for s in steps)
        other = total - prepare - forward - sample
        forward_fraction[batch_size] = forward / total
        rows.append(
            (
                batch_size,
                f"{total / len(steps) * 1000:.1f}",
                f"{statistics.median(s.step_seconds for s in steps) * 1000:.1f}",
                f"{batch_size * len(steps) / total:.0f}",
                f"{forward / total:.1%}",
                f"{prepare / total:.1%}",
                f"{sample / total:.1%}",
                f"{other / total:.1%}",
                f"{skew:.2f}",
            )
        )
    print_table(
        (
            "batch",
            "step ms mean",
            "step ms p50",
            "output tok/s",
            "forward",
            "prepare",
            "sample",
            "other (scheduler, detok, outputs)",
            "longest/mean context",
        ),
        rows,
    )
    fraction = forward_fraction[TARGET_BATCH_SIZE]
    print(
        f"forward share of step time at batch {TARGET_BATCH_SIZE}: {fraction:.1%} "
        f"(target >= {TARGET_FORWARD_FRACTION:.0%}: {verdict(fraction, TARGET_FORWARD_FRACTION)})"
    )


def _measure(batch_size: int) -> tuple[list[StepStats], float]:
    """Step stats of the measured all-decode steps, and the mean longest/mean context.

    The longest context is rounded up to whole blocks, as a block-table gather reads it.
    """
    engine = make_engine(
        EngineClock(),
        max_num_seqs=batch_size,
        max_model_len=MAX_MODEL_LEN,
        num_gpu_blocks=batch_size * MAX_MODEL_LEN // BLOCK_SIZE,
        block_size=BLOCK_SIZE,
    )
    prompts = [r.prompt_token_ids for r in make_workload(PROMPTS)[:batch_size]]
    params = SamplingParams(
        max_tokens=NUM_SKIPPED_STEPS + NUM_MEASURED_STEPS + NUM_MARGIN_TOKENS,
        temperature=0.0,
        ignore_eos=True,
    )
    context_lens = {}
    for prompt in prompts:
        context_lens[engine.add_request(prompt, params)] = len(prompt)
    steps: list[StepStats] = []
    ratios: list[float] = []
    num_decode_steps = 0
    while len(steps) < NUM_MEASURED_STEPS:
        if not engine.has_unfinished_requests():
            raise RuntimeError("requests finished before the measurement did; raise max_tokens")
        outputs = engine.step()
        stats = engine.last_step
        is_full_decode = stats.num_prompt_tokens == 0 and stats.num_requests == batch_size
        if is_full_decode:
            num_decode_steps += 1
            if num_decode_steps > NUM_SKIPPED_STEPS:
                steps.append(stats)
                # this step attended over prompt + outputs so far for each request
                longest = -(-max(context_lens.values()) // BLOCK_SIZE) * BLOCK_SIZE
                ratios.append(batch_size * longest / sum(context_lens.values()))
        for output in outputs:
            context_lens[output.request_id] += len(output.new_token_ids)
    return steps, statistics.mean(ratios)
