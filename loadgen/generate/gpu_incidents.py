"""The plans of the GPU-side kinds: a busy-but-idle GPU (steps slow while a capped batch
cannot grow) and speculative decoding that stops paying (drafts no longer accepted), with
their benign twins (``kinds.py`` holds the table)."""

from __future__ import annotations

import json
import math

from loadgen.generate.base import round_rate
from loadgen.generate.benign import _growing
from loadgen.generate.capacity import decode_step_seconds
from loadgen.generate.incidents import _admin
from loadgen.generate.plan import Draw, Fragment, Plan

#: max_num_seqs over the baseline's batch in a busy-idle-gpu run: a cap set at about what
#: the traffic needs (the baseline runs at 0.8 of what the capped fleet serves).
CAP_HEADROOM = 1.25
#: The n-gram drafts per step, and the simulator's acceptance rate before the fall
#: (``engine.sim.features``' default).
NUM_SPECULATIVE_TOKENS = 4
BASE_ACCEPTANCE = 0.7


def busy_idle_gpu(d: Draw) -> Plan:
    """``max_num_seqs`` caps the batch at a quarter over the baseline's (Little's law at
    ``load`` of capacity); then every replica's decode steps take ``magnitude`` times as long
    (a sleep after each step: a memory-bound step slowed by longer contexts or a throttled
    memory clock), until the recovery. The batch cannot grow to absorb it: requests queue."""
    b = d.base
    batch = max(1.0, b.load * b.max_num_seqs)
    cap = max(2, math.ceil(CAP_HEADROOM * batch))
    engine = {**b.engine(), "max_num_seqs": cap}
    step = decode_step_seconds(b.gpu, cap, b.prompt_tokens + b.output_tokens // 2)
    replicas = list(range(b.replicas))

    def at_level(level: float) -> Fragment:
        delay = round(level * (d.magnitude - 1) * step, 6)
        return _admin(replicas, {"step_delay_seconds": delay})

    details = {"max_num_seqs": cap, "baseline_batch": round(batch, 2)}
    details["decode_step_ms"] = round(step * 1000, 3)
    return Plan(
        [b.chat("chat", b.rate())],
        engine,
        at_level,
        _admin(replicas, {"step_delay_seconds": 0.0}),
        d.magnitude,
        1.0,
        details,
    )


def busy_gpu_healthy(d: Draw) -> Plan:
    """The GPU gets busier because there is more to do: traffic rises to ``magnitude`` times
    the baseline (at most 0.75 of capacity) and the batch grows with it."""
    return _growing(d, "busier")


def tokens_per_step(acceptance: float, drafts: int = NUM_SPECULATIVE_TOKENS) -> float:
    """The tokens a sequence gains per step when each draft is accepted with ``acceptance``
    given the ones before it were: 1 + a + a^2 + ... + a^drafts."""
    return sum(acceptance**i for i in range(drafts + 1))


def acceptance_for(tokens: float, drafts: int = NUM_SPECULATIVE_TOKENS) -> float:
    """The acceptance rate at which a step yields ``tokens`` tokens (bisection: monotone)."""
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        if tokens_per_step(middle, drafts) < tokens:
            low = middle
        else:
            high = middle
    return low


def _speculating(d: Draw, low_acceptance: float) -> tuple[dict, Fragment, Fragment]:
    b = d.base
    spec = {"method": "ngram", "num_speculative_tokens": NUM_SPECULATIVE_TOKENS}
    engine = {**b.engine(), "speculative_config": json.dumps(spec)}
    replicas = list(range(b.replicas))

    def at_level(level: float) -> Fragment:
        rate = BASE_ACCEPTANCE - level * (BASE_ACCEPTANCE - low_acceptance)
        return _admin(replicas, {"spec_decode_acceptance_rate": round(rate, 4)})

    recovery = _admin(replicas, {"spec_decode_acceptance_rate": BASE_ACCEPTANCE})
    return engine, at_level, recovery  # type: ignore[return-value]


def spec_not_paying(d: Draw) -> Plan:
    """A fleet that speculates (n-gram, four drafts) serves a load near what it would serve
    without (``load`` of the estimated capacity); its drafts' acceptance rate falls from 0.7
    until a step yields ``magnitude`` times fewer tokens (each request needs that many times
    the steps, each verifying four drafts), and recovers. The fleet is over capacity."""
    low = acceptance_for(max(1.0, tokens_per_step(BASE_ACCEPTANCE) / d.magnitude))
    engine, at_level, recovery = _speculating(d, low)
    details = {"acceptance_before": BASE_ACCEPTANCE, "acceptance_after": round(low, 4)}
    details["num_speculative_tokens"] = NUM_SPECULATIVE_TOKENS
    b = d.base
    return Plan([b.chat("chat", b.rate())], engine, at_level, recovery, d.magnitude, 1.0, details)


def spec_low_load(d: Draw) -> Plan:
    """The same fall of the acceptance rate at a low load: requests take more steps, but
    the batch has room and nobody waits."""
    low = acceptance_for(max(1.0, tokens_per_step(BASE_ACCEPTANCE) / d.magnitude))
    engine, at_level, recovery = _speculating(d, low)
    details = {"acceptance_before": BASE_ACCEPTANCE, "acceptance_after": round(low, 4)}
    b = d.base
    rate = round_rate(b.rate())
    return Plan([b.chat("chat", rate)], engine, at_level, recovery, d.magnitude, 1.0, details)
