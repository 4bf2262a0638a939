"""Seeded open-loop schedules for offline runs: Poisson arrivals of a prompt-length mix."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import NamedTuple

from engine.errors import ConfigError
from engine.sim.offline import Arrival


class RequestShape(NamedTuple):
    """A kind of request in a mix: its prompt and output lengths and its share."""

    num_prompt_tokens: int
    max_tokens: int
    weight: float = 1.0


def poisson_schedule(
    rate_per_second: float,
    duration_seconds: float,
    mix: Sequence[RequestShape],
    seed: int = 0,
) -> list[Arrival]:
    """Poisson arrivals at ``rate_per_second`` for ``duration_seconds``, each request's
    shape drawn from ``mix`` by weight and its prompt of random byte ids (so prompts share
    no prefix). The same arguments give the same schedule."""
    if not rate_per_second > 0 or not duration_seconds > 0:
        raise ConfigError(
            f"rate_per_second={rate_per_second!r}, duration_seconds={duration_seconds!r}: "
            "both must be > 0"
        )
    if not mix or any(s.num_prompt_tokens < 1 or s.max_tokens < 1 for s in mix):
        raise ConfigError(f"mix={list(mix)!r}: give shapes with >= 1 prompt and output token")
    rng = random.Random(seed)
    weights = [s.weight for s in mix]
    arrivals = []
    t = rng.expovariate(rate_per_second)
    while t < duration_seconds:
        shape = rng.choices(mix, weights)[0]
        prompt = tuple(rng.randrange(256) for _ in range(shape.num_prompt_tokens))
        arrivals.append(Arrival(t, prompt, shape.max_tokens, f"sim-{len(arrivals)}"))
        t += rng.expovariate(rate_per_second)
    return arrivals
