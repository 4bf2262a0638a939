"""What every generated scenario draws before its kind perturbs it: the fleet (GPU, size,
knobs) and the traffic it serves at a baseline load, as a fraction of its capacity.

The baseline traffic is one tenant's chat stream (overload's and the tenant kinds': two or
three tenants'): a share of its prompts start with one of a few shared system prompts
(prefix caching has something to hit), the rest of each prompt and the output are uniform
around drawn means. The engine knobs are a deployment's: a
bounded waiting queue (``max_waiting_requests``, so an overload sheds load with 429s
instead of queueing without end, and the simulation's cost stays bounded) and a KV pool
sized generously for the drawn lengths, so only a kind that squeezes it preempts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from random import Random
from typing import Any

from loadgen.generate.capacity import (
    GPU_CHOICES,
    GpuChoice,
    decode_step_seconds,
    replica_capacity_rps,
)

BLOCK_TOKENS = 16  # the engine's default block_size
#: Output tokens per second a fleet may make at its estimated capacity: the simulation
#: costs CPU per step and per token, so a large fleet of fast GPUs gets fewer sequences.
TOKEN_BUDGET_PER_SECOND = 4000.0
#: The waiting queue each replica holds, in multiples of its max_num_seqs.
QUEUE_SLOTS_PER_SEQ = 4
#: The tenant of the baseline traffic (prefix caching is per tenant: its cache salt).
TENANT = "acme"


@dataclass(frozen=True)
class Ranges:
    """What a kind draws from (closed ranges)."""

    magnitude: tuple[float, float] = (1.5, 4.0)
    share: tuple[float, float] = (0.25, 1.0)
    replicas: tuple[int, int] = (2, 6)
    load: tuple[float, float] = (0.2, 0.6)
    max_num_seqs: tuple[int, int] = (8, 32)
    prefix_groups: tuple[int, int] = (2, 16)
    prefix_share: tuple[float, float] = (0.5, 1.0)
    prefix_blocks: tuple[int, int] = (4, 16)  # the shared prompt, in KV blocks


@dataclass(frozen=True)
class Base:
    """The drawn fleet and baseline traffic (means in tokens; ``load`` of capacity)."""

    gpu: GpuChoice
    replicas: int
    max_num_seqs: int
    max_num_batched_tokens: int
    prefix_groups: int
    prefix_tokens: int
    prefix_share: float
    tail_tokens: int
    output_tokens: int
    load: float
    seed: int
    #: one replica's estimated capacity (req/s) under this traffic
    replica_capacity_rps: float = field(default=0.0)

    @property
    def prompt_tokens(self) -> int:
        """The mean prompt: the shared prefix (when a request has one) and its own tail."""
        return self.prefix_tokens + self.tail_tokens

    def capacity_rps(self, active: int | None = None) -> float:
        """The estimated capacity of ``active`` replicas (all by default), req/s."""
        return self.replica_capacity_rps * (self.replicas if active is None else active)

    def rate(self, active: int | None = None) -> float:
        """The baseline arrival rate: ``load`` of the capacity of ``active`` replicas."""
        return self.load * self.capacity_rps(active)

    def decode_step_seconds(self) -> float:
        """A decode step at the baseline's typical batch (``load`` of the sequences)."""
        batch = max(1, round(self.load * self.max_num_seqs))
        return decode_step_seconds(self.gpu, batch, self.prompt_tokens + self.output_tokens // 2)

    def prompt(self, scale: float = 1.0) -> dict[str, Any]:
        """The prompt length distribution; ``scale`` lengthens the tail only."""
        tail = max(2, round(self.tail_tokens * scale))
        return _uniform(self.prefix_tokens + tail // 2, self.prefix_tokens + tail * 3 // 2)

    def output(self) -> dict[str, Any]:
        return _uniform(max(1, self.output_tokens // 2), self.output_tokens * 3 // 2)

    def chat(self, name: str, rate: float, tenant: str = TENANT, **changes: Any) -> dict:
        """A workload of the baseline's shape at ``rate`` req/s (fields in ``changes`` over)."""
        workload = {
            "name": name,
            "rate": round_rate(rate),
            "tenants": {tenant: 1},
            "prompt_tokens": self.prompt(),
            "output_tokens": self.output(),
            "prefix": {
                "groups": self.prefix_groups,
                "share": round(self.prefix_share, 3),
                "tokens": self.prefix_tokens,
            },
            "seed": self.seed,
        }
        return {**workload, **changes}

    def max_model_len(self, longest_prompt: int = 0) -> int:
        """Room for the longest prompt (drawn or ``longest_prompt``) and output, in 256s."""
        prompt = max(self.prefix_tokens + self.tail_tokens * 3 // 2, longest_prompt)
        return _round_up(prompt + self.output_tokens * 3 // 2 + BLOCK_TOKENS, 256)

    def engine(self, longest_prompt: int = 0, num_prefix_groups: int = 0) -> dict[str, Any]:
        """The engine knobs. NOTE: the KV pool holds every sequence at its longest four
        times over, four of ``longest_prompt`` and every prefix group twice, so nothing is
        preempted or evicted unless a kind squeezes it (the sim would size it from the
        GPU's memory: far larger, and slower to set up)."""
        max_model_len = self.max_model_len(longest_prompt)
        groups = max(self.prefix_groups, num_prefix_groups)
        blocks = 4 * self.max_num_seqs * (self.max_model_len() // BLOCK_TOKENS)
        blocks += 4 * (max_model_len // BLOCK_TOKENS)
        blocks += 2 * groups * (self.prefix_tokens // BLOCK_TOKENS)
        return {
            "model": self.gpu.model,
            "tensor_parallel_size": self.gpu.tensor_parallel_size,
            "max_model_len": max_model_len,
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "num_gpu_blocks": _round_up(blocks, 256),
            "max_waiting_requests": QUEUE_SLOTS_PER_SEQ * self.max_num_seqs,
        }

    def num_gpu_blocks(self, longest_prompt: int = 0, num_prefix_groups: int = 0) -> int:
        return int(self.engine(longest_prompt, num_prefix_groups)["num_gpu_blocks"])


def draw_base(rng: Random, ranges: Ranges, seed: int, prefix_share: float | None = None) -> Base:
    """The fleet and baseline traffic from ``ranges``. ``max_num_seqs`` is drawn up to what
    :data:`TOKEN_BUDGET_PER_SECOND` allows the fleet at capacity (never under the range's
    low end: a large fleet of fast GPUs then makes a little more)."""
    gpu = rng.choice(GPU_CHOICES)
    replicas = rng.randint(*ranges.replicas)
    load = rng.uniform(*ranges.load)
    step = decode_step_seconds(gpu)
    low, high = ranges.max_num_seqs
    allowed = math.floor(TOKEN_BUDGET_PER_SECOND * step / replicas)
    max_num_seqs = rng.randint(low, max(low, min(high, allowed)))
    base = Base(
        gpu=gpu,
        replicas=replicas,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=rng.choice((512, 1024, 2048)),
        prefix_groups=rng.randint(*ranges.prefix_groups),
        prefix_tokens=BLOCK_TOKENS * rng.randint(*ranges.prefix_blocks),
        prefix_share=prefix_share
        if prefix_share is not None
        else rng.uniform(*ranges.prefix_share),
        tail_tokens=rng.randint(32, 192),
        output_tokens=rng.randint(32, 128),
        load=load,
        seed=rng.randrange(1 << 20),
    )
    capacity = replica_capacity_rps(
        gpu,
        prompt_tokens=base.prompt_tokens,
        cached_prompt_tokens=base.prefix_share * base.prefix_tokens,
        output_tokens=base.output_tokens,
        max_num_seqs=max_num_seqs,
    )
    return Base(**{**base.__dict__, "replica_capacity_rps": capacity})


def round_rate(rate: float) -> float:
    """A rate with three significant decimals (req/s), never 0."""
    return max(0.001, round(rate, 3))


def _uniform(low: int, high: int) -> dict[str, Any]:
    return {"kind": "uniform", "min": int(low), "max": int(max(low, high))}


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step
