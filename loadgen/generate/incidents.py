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


#: The adapters the baseline's traffic asks for: they fit the loaded set and stay loaded.
HOT_ADAPTERS = 2
LORA_RANK = 8


def lora_engine(engine: dict, names: list[str], loaded: int, load_seconds: float) -> dict:
    """``engine`` serving the adapters ``names`` with ``loaded`` of them kept loaded (and as
    many in one batch), each cold load costing ``load_seconds`` of storage latency."""
    modules = [f"{name}=random:rank={LORA_RANK},seed={i + 1}" for i, name in enumerate(names)]
    return {
        **engine,
        "enable_lora": True,
        "max_loras": loaded,
        "max_cpu_loras": loaded,
        "max_lora_rank": LORA_RANK,
        "lora_load_seconds": round(load_seconds, 3),
        "lora_modules": modules,
    }


def adapter_thrash(d: Draw) -> Plan:
    """``share`` of the traffic moves to rare adapters, ``magnitude`` times as many as the
    loaded set (``max_cpu_loras``, drawn 2 to 4) holds, asked for alike: most of their
    requests find their adapter evicted and wait for its load (drawn 50 to 400 ms), and
    the step that loads it stalls the batch beside it. The baseline asks for two hot
    adapters and the base model, which stay loaded. Back in the recovery."""
    b = d.base
    rate = b.rate()
    loaded = d.rng.randint(HOT_ADAPTERS, 4)
    hot = [f"hot-{i}" for i in range(HOT_ADAPTERS)]
    rare = [f"rare-{i}" for i in range(max(loaded + 1, round(d.magnitude * loaded)))]
    load_seconds = d.rng.uniform(0.05, 0.4)
    models = {name: 1 for name in hot}

    def at_level(level: float) -> Fragment:
        moved = level * d.share
        return {
            "change": {"chat": {"rate": round_rate((1 - moved) * rate)}},
            "extra": [b.chat("rare", moved * rate, models={n: 1 for n in rare}, seed=b.seed + 11)],
        }

    details = {
        "loaded_adapters": loaded,
        "hot_adapters": hot,
        "rare_adapters": len(rare),
        "lora_load_ms": round(load_seconds * 1000, 1),
    }
    return Plan(
        [b.chat("chat", rate, models=models)],
        lora_engine(b.engine(), [*hot, *rare], loaded, load_seconds),
        at_level,
        {"change": {"chat": {"rate": round_rate(rate)}}},
        len(rare) / loaded,
        d.share,
        details,
        # NOTE: the rare requests' first tokens wait a load each; the tail rule's own rise
        factor=1.5,
    )


def cold_start(d: Draw) -> Plan:
    """A scale-out adds ``share`` of the replicas (at least one, under half: the token gaps'
    median stays a warm replica's) that are ready after a model load (drawn 1 to 3 s) but
    not warm: their steps take ``magnitude`` times as long for as long as the rule needs
    to see them (its window, ``for:`` and two evaluations) and one window more."""
    b = d.base
    added = min((b.replicas - 1) // 2, max(1, round(d.share * b.replicas)))
    steady = b.replicas - added
    step = b.decode_step_seconds()
    cold_seconds = d.clock.min_perturbation_seconds + d.clock.window_seconds
    engine = {
        **b.engine(),
        "model_load_seconds": round(d.rng.uniform(1.0, 3.0), 1),
        "warm_up_seconds": 0.0,
        "cold_seconds": round(cold_seconds, 1),
        "cold_step_factor": round(d.magnitude, 3),
    }

    def at_level(level: float) -> Fragment:
        return {"active_replicas": list(range(b.replicas))}

    details = {
        "steady_replicas": steady,
        "added_replicas": added,
        "model_load_seconds": engine["model_load_seconds"],
        "cold_seconds": engine["cold_seconds"],
        "decode_step_ms": round(step * 1000, 3),
    }
    return Plan(
        [b.chat("chat", b.rate(steady))],
        engine,
        at_level,
        {},
        d.magnitude,
        added / b.replicas,
        details,
        active=list(range(steady)),
        replica=steady,
        factor=min(1 + (d.magnitude - 1) / 2, itl_p99_factor(step, d.magnitude * step)),
    )


#: The simulator's share of structured answers that outgrow ``max_tokens`` when nothing is
#: wrong (``engine.sim.features.SimFeatureKnobs``): the baseline the rule compares with.
BASELINE_TRUNCATION_SHARE = 0.05
#: The least rate of structured requests a kind sends (req/s): truncation-rise needs 20
#: structured finishes in a window, 30 s at the benchmark's timing.
MIN_STRUCTURED_RPS = 1.0
SCHEMA_ROUTE = "extract"
NUM_SCHEMAS = 3


def schema_route(d: Draw) -> tuple[list[dict], float]:
    """The baseline traffic split into chat and a schema route (every request structured)
    carrying ``share`` of it, at least :data:`MIN_STRUCTURED_RPS` where the traffic has that
    much; and the route's share as realised."""
    b = d.base
    rate = b.rate()
    share = min(1.0, max(d.share, MIN_STRUCTURED_RPS / rate))
    structured = {"share": 1.0, "schemas": NUM_SCHEMAS}
    workloads = [b.chat(SCHEMA_ROUTE, share * rate, structured=structured)]
    if (1 - share) * rate >= 0.01:
        workloads.insert(0, b.chat("chat", (1 - share) * rate))
    return workloads, share


def structured_truncation(d: Draw) -> Plan:
    """A schema route's answers outgrow ``max_tokens`` (a prompt asks for more fields): the
    share of its structured answers cut before their object closes rises ``magnitude`` times
    from the simulator's baseline, on every replica; back in the recovery. The route carries
    ``share`` of the traffic."""
    b = d.base
    workloads, share = schema_route(d)
    replicas = list(range(b.replicas))
    knob = "structured_output_truncation_share"

    def at_level(level: float) -> Fragment:
        cut = BASELINE_TRUNCATION_SHARE * (1 + level * (d.magnitude - 1))
        return _admin(replicas, {knob: round(cut, 4)})

    recovery = _admin(replicas, {knob: BASELINE_TRUNCATION_SHARE})
    details = {"schema_route_rps": round_rate(share * b.rate())}
    return Plan(workloads, b.engine(), at_level, recovery, d.magnitude, share, details)


#: The longest outputs a kind makes, over the baseline's mean (the sim's cost per token).
MAX_OUTPUT_SCALE = 8.0


def longer_outputs(d: Draw, scale: float, share: float, name: str = "longer") -> Plan:
    """``share`` of the traffic (a stream of its own) answers ``scale`` times as long from the
    perturbation on, at the same arrivals; back in the recovery. The KV pool holds every
    sequence at the longer length, so nothing preempts."""
    b = d.base
    rate = b.rate()
    steady = (1 - share) * rate
    workloads = [b.chat("chat", steady)] if steady >= 0.01 else []
    workloads.append(b.chat(name, share * rate))
    out = b.output()

    def outputs(factor: float) -> dict:
        low, high = (max(1, round(out[k] * factor)) for k in ("min", "max"))
        return {**out, "min": low, "max": high}

    def at_level(level: float) -> Fragment:
        return {"change": {name: {"output_tokens": outputs(1 + level * (scale - 1))}}}

    engine = b.engine()
    longest = outputs(scale)["max"]
    room = b.max_model_len() + longest - out["max"]
    max_model_len = -(-room // 256) * 256
    blocks = 4 * b.max_num_seqs * (max_model_len // BLOCK_TOKENS)
    engine["max_model_len"] = max(engine["max_model_len"], max_model_len)
    engine["num_gpu_blocks"] = max(engine["num_gpu_blocks"], -(-blocks // 256) * 256)
    details = {"output_scale": round(scale, 4), "longer_rps": round_rate(share * rate)}
    recovery = {"change": {name: {"output_tokens": out}}}
    mean_rise = 1 + share * (scale - 1)
    return Plan(
        workloads,
        engine,
        at_level,
        recovery,
        d.magnitude,
        share,
        details,
        factor=round(1 + (mean_rise - 1) / 2, 4),
    )


def output_length_shift(d: Draw) -> Plan:
    """A model or prompt change makes ``share`` of the traffic answer longer, by as much as
    takes the fleet's decode work to ``magnitude`` times its estimated capacity at the same
    arrivals (at most :data:`MAX_OUTPUT_SCALE` times as long: the magnitude as realised)."""
    b = d.base
    scale = (d.magnitude / b.load - (1 - d.share)) / d.share
    scale = min(MAX_OUTPUT_SCALE, max(1.0, scale))
    plan = longer_outputs(d, scale, d.share)
    magnitude = b.load * (1 - d.share + d.share * scale)
    # NOTE: half the mean's rise (buckets and draws blur the rest), never over 1 + magnitude
    factor = min(plan.factor or 1.0, 1 + magnitude)
    return Plan(**{**plan.__dict__, "magnitude": round(magnitude, 4), "factor": factor})


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
