"""Seeded open-loop workloads: Poisson arrivals, long-tailed prompt and output lengths.

A workload is plain data (a list of ``RequestSpec``), generated once from a frozen
``WorkloadSpec`` and replayed unchanged against every engine setting a benchmark
compares, so the settings see the same requests at the same offsets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

# The tiny preset's byte-level tokenizer: ids 0-255 are bytes, 256 is BOS.
NUM_BYTE_TOKENS = 256
BOS_TOKEN_ID = 256


@dataclass(frozen=True)
class LengthDistribution:
    """Lognormal token counts: ``median`` tokens, log-space spread ``sigma``, clipped.

    A lognormal with sigma near 1 has the long right tail of real chat traffic
    (ShareGPT-like): most requests are short, a few are many times the median.
    """

    median: float
    sigma: float
    minimum: int
    maximum: int

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        values = rng.lognormal(mean=math.log(self.median), sigma=self.sigma, size=count)
        return np.clip(np.rint(values), self.minimum, self.maximum).astype(np.int64)


@dataclass(frozen=True)
class WorkloadSpec:
    """Requests arriving as a Poisson process over ``duration_seconds``.

    Every prompt is BOS, then ``shared_prefix_len`` tokens common to all requests (a
    system prompt; 0 for none), then ``unique_prompt_len`` tokens of its own. Prompt
    and output are clipped so that prompt + max_tokens <= ``max_model_len``.
    """

    arrival_rate_per_second: float
    duration_seconds: float
    unique_prompt_len: LengthDistribution
    output_len: LengthDistribution
    max_model_len: int
    shared_prefix_len: int = 0
    seed: int = 0


# The chat-like workload the batching, efficiency and KV memory benchmarks share:
# prompts of median 97 tokens (p99 ~ 600), outputs of median 64 (p99 ~ 450), both
# lognormal, in a 1024-token context. Benchmarks replace the rate and duration.
CHAT_MAX_MODEL_LEN = 1024
CHAT_WORKLOAD = WorkloadSpec(
    arrival_rate_per_second=1.0,
    duration_seconds=1.0,
    unique_prompt_len=LengthDistribution(median=96, sigma=0.8, minimum=4, maximum=768),
    output_len=LengthDistribution(median=64, sigma=0.9, minimum=2, maximum=512),
    max_model_len=CHAT_MAX_MODEL_LEN,
    seed=0,
)


class RequestSpec(NamedTuple):
    request_id: str
    arrival_seconds: float
    prompt_token_ids: tuple[int, ...]
    max_tokens: int


def poisson_arrivals(
    rng: np.random.Generator, rate_per_second: float, duration_seconds: float
) -> list[float]:
    """Arrival offsets in [0, duration_seconds): exponential gaps of mean 1/rate."""
    arrivals: list[float] = []
    now = rng.exponential(1.0 / rate_per_second)
    while now < duration_seconds:
        arrivals.append(float(now))
        now += rng.exponential(1.0 / rate_per_second)
    return arrivals


def make_workload(spec: WorkloadSpec) -> list[RequestSpec]:
    """The requests of ``spec``, in arrival order; the same spec gives the same list."""
    rng = np.random.default_rng(spec.seed)
    arrivals = poisson_arrivals(rng, spec.arrival_rate_per_second, spec.duration_seconds)
    unique_lens = spec.unique_prompt_len.draw(rng, len(arrivals))
    output_lens = spec.output_len.draw(rng, len(arrivals))
    prefix = (BOS_TOKEN_ID, *_random_tokens(rng, spec.shared_prefix_len))
    requests = []
    for i, (arrival, unique_len, output_len) in enumerate(
        zip(arrivals, unique_lens, output_lens, strict=True)
    ):
        # at least one output token must fit after the prompt
        unique_len = min(int(unique_len), spec.max_model_len - 1 - len(prefix))
        prompt = prefix + _random_tokens(rng, unique_len)
        max_tokens = max(1, min(int(output_len), spec.max_model_len - len(prompt)))
        requests.append(RequestSpec(f"req-{i}", arrival, prompt, max_tokens))
    return requests


def _random_tokens(rng: np.random.Generator, count: int) -> tuple[int, ...]:
    return tuple(int(t) for t in rng.integers(0, NUM_BYTE_TOKENS, size=count))


def describe(workload: list[RequestSpec], spec: WorkloadSpec) -> str:
    """One line for a benchmark's header: arrivals, rate and length percentiles."""
    prompt = np.array([len(r.prompt_token_ids) for r in workload])
    output = np.array([r.max_tokens for r in workload])
    return (
        f"{len(workload)} requests, Poisson {spec.arrival_rate_per_second:g} req/s over "
        f"{spec.duration_seconds:g} s (seed {spec.seed}); prompt tokens p50/p99/max "
        f"{_p(prompt, 50)}/{_p(prompt, 99)}/{prompt.max()}, output tokens p50/p99/max "
        f"{_p(output, 50)}/{_p(output, 99)}/{output.max()} (mean {output.mean():.0f})"
    )


def _p(values: np.ndarray, q: float) -> int:
    return int(np.percentile(values, q, method="inverted_cdf"))
