"""The benign kinds' plans: changes a fleet goes through on a normal day, each within
capacity, none of which should page. Each resembles an incident kind (``kinds.py``): the
benchmark learns whether a rule tells the two apart."""

from __future__ import annotations

import math

from loadgen.generate.base import round_rate
from loadgen.generate.incidents import (
    HOT_ADAPTERS,
    OTHER_TENANTS,
    SCHEMA_ROUTE,
    _admin,
    longer_outputs,
    lora_engine,
    schema_route,
)
from loadgen.generate.plan import Draw, Fragment, Plan

#: The highest load (of estimated capacity) a benign change takes the fleet to.
PEAK_LOAD = 0.75
NEW_TENANT = "newco"
POPULAR_ADAPTER = "popular"
#: The tenant that grows within capacity (tenant-growth), beside its steady neighbours.
GROWING_TENANT = "bulk"
#: The knobs a helpful change raises, each with the most it raises it to.
HELPFUL_KNOB_CAPS = {"max_num_seqs": 64, "max_num_batched_tokens": 8192}


def _growing(d: Draw, name: str, tenants: dict[str, int] | None = None) -> Plan:
    """Traffic that rises to ``magnitude`` times the baseline (at most :data:`PEAK_LOAD` of
    capacity), carried by a stream that was ``share`` of it; ``tenants``: the steady
    stream's, the growing one then being :data:`GROWING_TENANT`'s alone."""
    b = d.base
    rate = b.rate()
    magnitude = min(d.magnitude, PEAK_LOAD / b.load)
    steady = (1 - d.share) * rate
    mix = {} if tenants is None else {"tenants": dict(tenants)}
    workloads = [b.chat("chat", steady, **mix)] if steady >= 0.01 else []
    grower = {} if tenants is None else {"tenant": GROWING_TENANT}
    workloads.append(b.chat(name, d.share * rate, **grower))

    def at_level(level: float) -> Fragment:
        return {
            "change": {name: {"rate": round_rate(d.share * rate + level * (magnitude - 1) * rate)}}
        }

    recovery = {"change": {name: {"rate": round_rate(d.share * rate)}}}
    details = {"peak_load": round(b.load * magnitude, 4)}
    return Plan(workloads, b.engine(), at_level, recovery, magnitude, d.share, details)


def traffic_rise(d: Draw) -> Plan:
    """A rise within capacity that stays (the recovery phase brings it back)."""
    return _growing(d, "growth")


def diurnal(d: Draw) -> Plan:
    """A day's curve: up in ramp phases to the peak, down in as many (``kinds.py`` marks it
    as ramping both ways)."""
    return _growing(d, "daytime")


def tenant_growth(d: Draw) -> Plan:
    """One tenant (:data:`GROWING_TENANT`), ``share`` of the baseline's requests, grows
    until the fleet's traffic is ``magnitude`` times the baseline (at most
    :data:`PEAK_LOAD` of capacity) while the other tenants hold theirs: its share of the
    work concentrates as a noisy tenant's does, within capacity. It stays."""
    return _growing(d, "tenant", tenants=OTHER_TENANTS)


def helpful_knob(d: Draw) -> Plan:
    """A live knob raised ``magnitude`` times on ``share`` of the replicas (a canary
    first): more sequences or a larger step budget, neither binding at this load. It stays."""
    b = d.base
    engine = b.engine()
    knob = d.rng.choice(sorted(HELPFUL_KNOB_CAPS))
    old = engine[knob]
    new = min(HELPFUL_KNOB_CAPS[knob], round(old * d.magnitude))
    count = max(1, round(d.share * b.replicas))
    patched = list(range(count))
    fragment = _admin(patched, {knob: new})
    details = {"knob": knob, "from": old, "to": new, "patched_replicas": patched}
    return Plan(
        [b.chat("chat", b.rate())],
        engine,
        lambda level: fragment,
        {},
        new / old,
        count / b.replicas,
        details,
        replica=patched[0],
    )


def noop_deploy(d: Draw) -> Plan:
    """A deploy, on ``share`` of the replicas, of a limit no request can reach: the waiting
    queue's bound raised ``magnitude`` times, or a per-tenant cap at ``magnitude`` times
    the most a replica ever holds (its sequences and its bounded queue)."""
    b = d.base
    engine = b.engine()
    knob = d.rng.choice(("max_concurrency_per_tenant", "max_waiting_requests"))
    held = {
        "max_waiting_requests": engine["max_waiting_requests"],
        "max_concurrency_per_tenant": b.max_num_seqs + engine["max_waiting_requests"],
    }[knob]
    new = round(held * d.magnitude)
    count = max(1, round(d.share * b.replicas))
    patched = list(range(count))
    fragment = _admin(patched, {knob: new})
    details = {"knob": knob, "from": engine.get(knob), "to": new, "patched_replicas": patched}
    return Plan(
        [b.chat("chat", b.rate())],
        engine,
        lambda level: fragment,
        {},
        new / held,
        count / b.replicas,
        details,
        replica=patched[0],
    )


def replica_restart(d: Draw) -> Plan:
    """``share`` of the replicas (at least one, under half) restart at the perturbation's
    start: fresh engines with cold caches; their in-flight requests fail."""
    b = d.base
    count = min(max(1, (b.replicas - 1) // 2), max(1, math.floor(d.share * b.replicas)))
    restarted = sorted(d.rng.sample(range(b.replicas), count))
    return Plan(
        [b.chat("chat", b.rate())],
        b.engine(),
        lambda level: {"restart": restarted},
        {},
        d.magnitude,
        count / b.replicas,
        {"restarted_replicas": restarted},
    )


def new_tenant(d: Draw) -> Plan:
    """A tenant joins with ``share`` of the baseline's rate (capped so the fleet stays at
    most :data:`PEAK_LOAD` of capacity), prompts ``magnitude`` times as long past its own
    shared prefix; it stays."""
    b = d.base
    rate = b.rate()
    share = min(d.share, PEAK_LOAD / b.load - 1)
    prompt = b.prompt(scale=d.magnitude)

    def at_level(level: float) -> Fragment:
        stream = b.chat("tenant", level * share * rate, tenant=NEW_TENANT, prompt_tokens=prompt)
        return {"extra": [stream]}

    details = {"tenant": NEW_TENANT, "tenant_rate_rps": round_rate(share * rate)}
    engine = b.engine(longest_prompt=prompt["max"])
    return Plan(
        [b.chat("chat", rate)], engine, at_level, at_level(1.0), d.magnitude, share, details
    )


def popular_adapter(d: Draw) -> Plan:
    """A new adapter takes ``share`` of the traffic and stays: the loaded set has room for
    it beside the two hot ones, so it loads once and stays warm (``magnitude``: none, 1)."""
    b = d.base
    rate = b.rate()
    hot = [f"hot-{i}" for i in range(HOT_ADAPTERS)]
    loaded = HOT_ADAPTERS + 1
    load_seconds = d.rng.uniform(0.05, 0.4)

    def at_level(level: float) -> Fragment:
        moved = level * d.share
        return {
            "change": {"chat": {"rate": round_rate((1 - moved) * rate)}},
            "extra": [b.chat("popular", moved * rate, models={POPULAR_ADAPTER: 1})],
        }

    details = {"loaded_adapters": loaded, "adapter": POPULAR_ADAPTER}
    return Plan(
        [b.chat("chat", rate, models={name: 1 for name in hot})],
        lora_engine(b.engine(), [*hot, POPULAR_ADAPTER], loaded, load_seconds),
        at_level,
        at_level(1.0),
        d.magnitude,
        d.share,
        details,
    )


def warm_scale_out(d: Draw) -> Plan:
    """A scale-out adds ``share`` of the replicas (at least one, under half), each warmed
    up (drawn 1 to 3 s) before it is ready, so it serves at full speed from its first
    request (``magnitude``: none, 1)."""
    b = d.base
    added = min((b.replicas - 1) // 2, max(1, round(d.share * b.replicas)))
    steady = b.replicas - added
    engine = {
        **b.engine(),
        "model_load_seconds": round(d.rng.uniform(1.0, 3.0), 1),
        "warm_up_seconds": round(d.rng.uniform(1.0, 3.0), 1),
    }
    return Plan(
        [b.chat("chat", b.rate(steady))],
        engine,
        lambda level: {"active_replicas": list(range(b.replicas))},
        {},
        d.magnitude,
        added / b.replicas,
        {"steady_replicas": steady, "added_replicas": added},
        active=list(range(steady)),
        replica=steady,
    )


def structured_roomy(d: Draw) -> Plan:
    """The schema route's traffic grows ``magnitude`` times (the fleet stays at most
    :data:`PEAK_LOAD` of capacity) with room to close: its answers fit ``max_tokens`` as
    before. More structured answers, none more often cut. It stays."""
    b = d.base
    workloads, share = schema_route(d)
    rate = b.rate()
    magnitude = max(1.0, min(d.magnitude, 1 + (PEAK_LOAD / b.load - 1) / share))
    route = share * rate

    def at_level(level: float) -> Fragment:
        grown = route * (1 + level * (magnitude - 1))
        return {"change": {SCHEMA_ROUTE: {"rate": round_rate(grown)}}}

    recovery = {"change": {SCHEMA_ROUTE: {"rate": round_rate(route)}}}
    details = {"schema_route_rps": round_rate(route), "peak_schema_route_rps": round_rate(route * magnitude)}  # fmt: skip
    return Plan(workloads, b.engine(), at_level, recovery, magnitude, share, details)


def longer_answers_within_capacity(d: Draw) -> Plan:
    """``share`` of the traffic answers ``magnitude`` times as long (a new model that says a
    little more), the fleet's decode work staying at most :data:`PEAK_LOAD` of capacity
    (the scale as realised). It stays."""
    b = d.base
    room = (PEAK_LOAD / b.load - (1 - d.share)) / d.share
    scale = max(1.0, min(d.magnitude, room))
    plan = longer_outputs(d, scale, d.share, name="answers")
    return Plan(**{**plan.__dict__, "magnitude": round(scale, 4), "factor": None})
