"""The simulated GPUs a generated scenario runs on, and what a replica of each can serve.

The specs are those whose decode step lasts 10-25 ms (``engine.sim.step_cost`` at batch 1):
the virtual fleet pays CPU per step and per token, so a faster GPU (3 ms steps) costs three
times the simulation for the same virtual minute, and a slower one makes a minute hold too
few steps for a latency percentile. Capacity is estimated from the same step cost model the
replicas run on, so a generated overload really exceeds what the fleet serves and a benign
rise really stays under it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from engine.sim.step_cost import BatchItem, StepCostModel
from engine.sim.target import parse_target


@dataclass(frozen=True)
class GpuChoice:
    """A simulated model on a GPU (``sim:<model>@<gpu>``), over ``tensor_parallel_size``."""

    model: str
    tensor_parallel_size: int = 1


#: Decode steps (batch 1, 600 tokens of context): 10.3, 18.2, 11.5, 15.3 and 22.8 ms.
GPU_CHOICES: tuple[GpuChoice, ...] = (
    GpuChoice("sim:llama-3.1-8b@a100"),
    GpuChoice("sim:qwen2.5-14b@a100"),
    GpuChoice("sim:qwen2.5-14b@h100"),
    GpuChoice("sim:llama-3.1-70b@h100", tensor_parallel_size=4),
    GpuChoice("sim:llama-3.1-8b@l40s"),
)


@functools.cache
def step_cost_model(choice: GpuChoice) -> StepCostModel:
    """The step cost model a replica of ``choice`` prices its steps with (bfloat16)."""
    target = parse_target(choice.model)
    return StepCostModel(
        target.model.shape,
        target.gpu,
        experts=target.model.experts,
        tensor_parallel_size=choice.tensor_parallel_size,
    )


def decode_step_seconds(choice: GpuChoice, batch: int = 1, context_tokens: int = 600) -> float:
    """One decode step of ``batch`` sequences with ``context_tokens`` each (seconds)."""
    batch = max(1, batch)
    items = [BatchItem(1, context_tokens)] * batch
    return step_cost_model(choice).cost(items, batch).step_seconds


def step_seconds_with_prefill(
    choice: GpuChoice, batch: int, context_tokens: int, prefill_tokens: int
) -> float:
    """A step of ``batch`` decodes that also computes ``prefill_tokens`` of one prompt."""
    items = [BatchItem(1, context_tokens)] * batch + [BatchItem(prefill_tokens, prefill_tokens)]
    return step_cost_model(choice).cost(items, batch + 1).step_seconds


def prefill_tokens_for_step(
    choice: GpuChoice, batch: int, context_tokens: int, step_seconds: float
) -> int:
    """The fewest prompt tokens whose prefill, beside ``batch`` decodes, makes a step last
    at least ``step_seconds`` (at most 65,536: the cost is monotone in the tokens)."""
    low, high = 1, 65_536
    while low < high:
        middle = (low + high) // 2
        if step_seconds_with_prefill(choice, batch, context_tokens, middle) >= step_seconds:
            high = middle
        else:
            low = middle + 1
    return low


def replica_capacity_rps(
    choice: GpuChoice,
    *,
    prompt_tokens: float,
    cached_prompt_tokens: float,
    output_tokens: float,
    max_num_seqs: int,
) -> float:
    """Requests per second one replica serves at most: an estimate, on the low side.

    At capacity every one of the ``max_num_seqs`` slots decodes: a step of that batch (at
    the mean context, prompt plus half the output) emits one token per slot, so a request
    holds a slot for ``output_tokens`` steps, i.e. costs ``output_tokens x step / slots``
    seconds of the replica. Its prefill adds the compute of its uncached prompt tokens.
    NOTE: at full compute, with no credit for the spare compute a memory-bound decode step
    leaves: at capacity slots free in waves (requests admitted together finish together),
    and a wave's prompts fill compute-bound steps. With the credit the estimate was up to
    1.3x what a saturated replica served; without it, a little under. Mean lengths, no
    preemption: it need not be exact (a drill measures the signals), only place a load
    under or over what the fleet serves, which low is the safe side of for both.
    """
    slots = max(1, max_num_seqs)
    context = max(1, math.ceil(prompt_tokens + output_tokens / 2))
    decode = decode_step_seconds(choice, slots, context)
    uncached = max(0, math.ceil(prompt_tokens - cached_prompt_tokens))
    model = step_cost_model(choice)
    prefill = model.cost([BatchItem(uncached, math.ceil(prompt_tokens))], 1).compute_seconds
    return 1.0 / (output_tokens * decode / slots + prefill)
