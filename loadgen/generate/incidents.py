"""The incident kinds' plans: one function per triage cause, from a :class:`Draw` to the
scenario's traffic and phase changes (the table in ``kinds.py`` says what each magnitude and
share mean, and which rule and signal go with each)."""

from __future__ import annotations

import bisect
import math

from engine.metric_names import BUCKETS
from loadgen.generate.base import BLOCK_TOKENS, round_rate
from loadgen.generate.capacity import prefill_tokens_for_step, step_seconds_with_prefill
from loadgen.generate.plan import Draw, Fragment, Plan

#: The share of a replica's steps a long prompt's prefill chunks should stall: over the
#: 1 % a p99 can hide, with margin for Poisson arrivals and the stalls' own length.
STALLED_STEP_SHARE = 0.03
#: The most of a replica's time the long prompts' prefills may take: more, and the
#: perturbation is an overload too (the baseline is at most 0.6 of capacity).
LONG_PROMPT_MAX_LOAD = 0.15
LONG_PROMPT_MAX_TOKENS = 16_384
#: The tenants of an overload's traffic, its surge included: arrivals above capacity
#: spread over the tenants as before it (one tenant that takes the fleet is a noisy tenant).
OVERLOAD_TENANTS = {"acme": 2, "globex": 1}
#: The noisy tenant, and the tenants it starves.
NOISY_TENANT = "bulk"
OTHER_TENANTS = {"acme": 1, "globex": 1}
#: The engine's ITL histogram buckets (seconds): what its p99 can read.
ITL_BUCKETS = BUCKETS["inter_token_latency"]


def itl_p99_factor(baseline_seconds: float, stalled_seconds: float) -> float:
    """The least an ITL p99 read from the histogram moves from a baseline of steps of
    ``baseline_seconds`` to one whose p99 is a ``stalled_seconds`` step: the stalled step's
    bucket's lower edge over the baseline's bucket's upper edge (at least 1). NOTE: a p99
    interpolates inside a bucket, so 12 ms steps read up to 25 ms and 70 ms ones from 50."""
    upper = ITL_BUCKETS[
        min(bisect.bisect_left(ITL_BUCKETS, baseline_seconds), len(ITL_BUCKETS) - 1)
    ]
    at = bisect.bisect_left(ITL_BUCKETS, stalled_seconds)
    lower = ITL_BUCKETS[at - 1] if at > 0 else 0.0
    return max(1.0, lower / upper)


def _admin(replicas: list[int], patch: dict) -> Fragment:
    return {"admin": [{"replica": r, "patch": dict(patch)} for r in replicas]}


def prefill_interference(d: Draw) -> Plan:
    """Long prompts from one to three tenants at ``share`` of the baseline's rate. Each is
    prefilled in chunks (``max_num_batched_tokens``) sized so a step carrying one lasts
    ``magnitude`` times the baseline's slowest common step; a prompt has enough chunks that
    its stalls are 3 % of a replica's steps, and there are fewer of them (a smaller share
    than drawn) where their prefills would take over 15 % of a replica's time.

    NOTE: that slowest common step is decodes beside a whole uncached chat prompt at its
    longest, not its tail alone: the requests without a shared prefix prefill whole, often
    enough to set the baseline's ITL p99."""
    b = d.base
    rate = b.rate()
    batch = max(1, round(b.load * b.max_num_seqs))
    context = b.prompt_tokens + b.output_tokens // 2
    longest = b.prefix_tokens + b.tail_tokens * 3 // 2
    base_step = step_seconds_with_prefill(b.gpu, batch, context, longest)
    chunk = prefill_tokens_for_step(b.gpu, batch, context, d.magnitude * base_step)
    chunk = -(-chunk // BLOCK_TOKENS) * BLOCK_TOKENS
    stall = step_seconds_with_prefill(b.gpu, batch, context, chunk)
    per_replica = min(d.share * rate / b.replicas, LONG_PROMPT_MAX_LOAD / (stall - base_step))
    long_rate = per_replica * b.replicas
    # NOTE: a replica takes a step every decode step, most of them plain decodes
    steps_per_second = 1 / b.decode_step_seconds()
    chunks = max(1, math.ceil(STALLED_STEP_SHARE * steps_per_second / per_replica))
    chunks = min(chunks, max(1, LONG_PROMPT_MAX_TOKENS // chunk))
    # NOTE: more chunks each take a step's time too: keep their load under the bound
    chunks = max(
        1, min(chunks, math.floor(LONG_PROMPT_MAX_LOAD / (per_replica * (stall - base_step))))
    )
    long_prompt = chunk * chunks
    tenants = {f"batch-{i + 1}": 1 for i in range(d.rng.randint(1, 3))}
    engine = {**b.engine(long_prompt), "max_num_batched_tokens": chunk + b.max_num_seqs}

    def at_level(level: float) -> Fragment:
        stream = {
            "name": "long",
            "rate": round_rate(level * long_rate),
            "tenants": tenants,
            "prompt_tokens": long_prompt,
            "output_tokens": {"kind": "uniform", "min": 4, "max": 16},
            "seed": b.seed + 7,
        }
        return {"extra": [stream]}

    details = {
        "long_prompt_tokens": long_prompt,
        "chunk_tokens": chunk,
        "chunks_per_prompt": chunks,
        "long_rate_rps": round_rate(long_rate),
        "tenants": list(tenants),
        "baseline_step_ms": round(base_step * 1000, 3),
        "stalled_step_ms": round(stall * 1000, 3),
    }
    return Plan(
        [b.chat("chat", rate)],
        engine,
        at_level,
        {},
        d.magnitude,
        long_rate / rate,
        details,
        factor=min(1 + (d.magnitude - 1) / 2, itl_p99_factor(base_step, stall)),
    )


def kv_exhaustion(d: Draw) -> Plan:
    """The usable KV pool of ``share`` of the replicas shrinks to the baseline running set's
    demand over ``magnitude`` (never under one request of max_model_len, which the engine
    refuses), and is given back in the recovery."""
    b = d.base
    engine = b.engine()
    count = max(1, round(d.share * b.replicas))
    squeezed = list(range(count))
    running = max(1.0, b.load * b.max_num_seqs)  # NOTE: Little's law at ``load`` of capacity
    own = math.ceil((b.tail_tokens + b.output_tokens / 2) / BLOCK_TOKENS)
    shared = min(b.prefix_groups, math.ceil(running)) * (b.prefix_tokens // BLOCK_TOKENS)
    demand = math.ceil(running * own) + shared
    floor_blocks = math.ceil(engine["max_model_len"] / BLOCK_TOKENS)

    def usable(level: float) -> int:
        return max(floor_blocks, math.floor(demand / (1 + level * (d.magnitude - 1))))

    def at_level(level: float) -> Fragment:
        return _admin(squeezed, {"num_usable_gpu_blocks": usable(level)})

    recovery = _admin(squeezed, {"num_usable_gpu_blocks": engine["num_gpu_blocks"]})
    details = {
        "squeezed_replicas": squeezed,
        "demand_blocks": demand,
        "usable_blocks": usable(1.0),
        "num_gpu_blocks": engine["num_gpu_blocks"],
    }
    return Plan(
        [b.chat("chat", b.rate())],
        engine,
        at_level,
        recovery,
        demand / usable(1.0),
        count / b.replicas,
        details,
    )


def prefix_break(d: Draw) -> Plan:
    """A per-request salt at the top of the shared prompt on 1 - 1/``magnitude`` of the
    shared-prefix traffic (``share`` of the traffic has a shared prefix), so the hit rate
    falls to about 1/``magnitude`` of its baseline; the salt is removed in the recovery."""
    b = d.base
    rate = b.rate()

    def at_level(level: float) -> Fragment:
        salted = level * (1 - 1 / d.magnitude)
        prefix = {**b.chat("x", 1)["prefix"], "salt_per_request": True}
        return {
            "change": {"chat": {"rate": round_rate((1 - salted) * rate)}},
            "extra": [b.chat("salted", salted * rate, prefix=prefix)],
        }

    recovery = {"change": {"chat": {"rate": round_rate(rate)}}}
    details = {"salted_share": round(1 - 1 / d.magnitude, 4), "prefix_groups": b.prefix_groups}
    return Plan(
        [b.chat("chat", rate)], b.engine(), at_level, recovery, d.magnitude, d.share, details
    )


def prefix_scatter(d: Draw) -> Plan:
    """Scale-out under round-robin from n to ``replicas`` (n = replicas / ``magnitude``,
    at least one replica and one added): the new replicas start cold. The prefix groups
    are many enough that a new replica stays mostly cold through the rule's window and
    ``for:``; the warm-up lets the n warm replicas see most groups first."""
    b = d.base
    warm = min(b.replicas - 1, max(1, round(b.replicas / d.magnitude)))
    rate = b.rate(warm)
    per_new_replica = rate / b.replicas
    # NOTE: a ramp's replicas join early and warm up before the perturbation
    cold_seconds = d.clock.window_seconds + d.clock.for_seconds
    cold_seconds += d.clock.max_ramp_seconds(d.num_ramp)
    # NOTE: a replica that has taken n requests has seen about 1 - exp(-n / G) of G groups;
    # with G = 0.7 x its requests over the window and for:, a new replica's hit rate
    # averages about half its warm rate there. The warm replicas get two requests per
    # group before the baseline (86 % of the groups seen), the baseline warms them further.
    groups = min(200, max(16, round(0.7 * per_new_replica * cold_seconds)))
    warmup = 2 * groups / (rate / warm)
    prefix = {"groups": groups, "share": round(b.prefix_share, 3), "tokens": b.prefix_tokens}

    def at_level(level: float) -> Fragment:
        added = max(1, round(level * (b.replicas - warm)))
        return {"active_replicas": list(range(warm + added))}

    details = {"warm_replicas": warm, "added_replicas": b.replicas - warm, "prefix_groups": groups}
    return Plan(
        [b.chat("chat", rate, prefix=prefix)],
        b.engine(num_prefix_groups=groups),
        at_level,
        {},
        b.replicas / warm,
        d.share,
        details,
        active=list(range(warm)),
        warmup_seconds=warmup,
    )


def overload(d: Draw) -> Plan:
    """Arrivals rise to ``magnitude`` times the fleet's estimated capacity, carried by a
    stream that was ``share`` of the baseline traffic, with the same tenants in the same
    proportions (:data:`OVERLOAD_TENANTS`); back in the recovery.

    NOTE: the surge used to be one tenant's of its own; one tenant taking the fleet is
    ``noisy-tenant`` now (cap that tenant), overload is the fleet's (scale out)."""
    b = d.base
    rate, capacity = b.rate(), b.capacity_rps()
    steady = (1 - d.share) * rate
    mix = {"tenants": dict(OVERLOAD_TENANTS)}
    workloads = [b.chat("chat", steady, **mix)] if steady >= 0.01 else []
    workloads.append(b.chat("surge", d.share * rate, **mix))

    def at_level(level: float) -> Fragment:
        total = rate + level * (d.magnitude * capacity - rate)
        return {"change": {"surge": {"rate": round_rate(total - steady)}}}

    recovery = {"change": {"surge": {"rate": round_rate(d.share * rate)}}}
    details = {"peak_rate_rps": round_rate(d.magnitude * capacity)}
    return Plan(workloads, b.engine(), at_level, recovery, d.magnitude, d.share, details)


def slow_replica(d: Draw) -> Plan:
    """``share`` of the replicas (at least one, under half: the fleet median stays a
    healthy one) sleep after every step for (``magnitude`` - 1) x the spec's decode step,
    so their steps take ``magnitude`` times as long; back to normal in the recovery."""
    b = d.base
    count = min((b.replicas - 1) // 2, max(1, math.floor(d.share * b.replicas)))
    slowed = sorted(d.rng.sample(range(b.replicas), count))
    step = b.decode_step_seconds()

    def at_level(level: float) -> Fragment:
        delay = round(level * (d.magnitude - 1) * step, 6)
        return _admin(slowed, {"step_delay_seconds": delay})

    details = {"slowed_replicas": slowed, "decode_step_ms": round(step * 1000, 3)}
    return Plan(
        [b.chat("chat", b.rate())],
        b.engine(),
        at_level,
        _admin(slowed, {"step_delay_seconds": 0.0}),
        d.magnitude,
        count / b.replicas,
        details,
        replica=slowed[0],
    )


def noisy_tenant(d: Draw) -> Plan:
    """One tenant (:data:`NOISY_TENANT`) that sent ``share`` of the baseline's requests
    takes the arrivals to ``magnitude`` times the fleet's estimated capacity on its own,
    with the same prompts, while the other tenants hold their rate; back in the recovery.
    At capacity 1.5x and a baseline at 0.6 of it its share of the requests is at least 0.6
    at the full level: a rise of 0.35 or more from the share drawn."""
    b = d.base
    rate, capacity = b.rate(), b.capacity_rps()
    steady = (1 - d.share) * rate
    workloads = [b.chat("chat", steady, tenants=dict(OTHER_TENANTS))]
    workloads.append(b.chat("noisy", d.share * rate, tenant=NOISY_TENANT))

    def at_level(level: float) -> Fragment:
        total = rate + level * (d.magnitude * capacity - rate)
        return {"change": {"noisy": {"rate": round_rate(total - steady)}}}

    recovery = {"change": {"noisy": {"rate": round_rate(d.share * rate)}}}
    peak = d.magnitude * capacity
    details = {
        "tenant": NOISY_TENANT,
        "peak_rate_rps": round_rate(peak),
        "tenant_peak_share": round((peak - steady) / peak, 4),
    }
    return Plan(workloads, b.engine(), at_level, recovery, d.magnitude, d.share, details)
