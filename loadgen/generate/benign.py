"""The benign kinds' plans: changes a fleet goes through on a normal day, each within
capacity, none of which should page. Each resembles an incident kind (``kinds.py``): the
benchmark learns whether a rule tells the two apart."""

from __future__ import annotations

import math

from loadgen.generate.base import round_rate
from loadgen.generate.incidents import OTHER_TENANTS, _admin
from loadgen.generate.plan import Draw, Fragment, Plan

#: The highest load (of estimated capacity) a benign change takes the fleet to.
PEAK_LOAD = 0.75
NEW_TENANT = "newco"
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
