"""One generated scenario: a kind drawn for a seed and an index, its fleet, traffic,
magnitude, share, onset and durations drawn from the kind's ranges, assembled into the
mapping ``loadgen.scenario.parse_scenario`` reads, with ``generated:`` recording the draws.

Pure: the same seed and index give the same mapping (every draw comes from one
``random.Random`` seeded from them; no wall clock, no global random state).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from random import Random
from typing import Any

from loadgen.drill_report import DrillTiming
from loadgen.generate.base import draw_base
from loadgen.generate.kinds import PREFIXED, RAMP, Kind, expected_factor, incident_of
from loadgen.generate.plan import Draw, Plan
from loadgen.generate.timing import Durations, draw_durations, long_enough, rule_clock
from loadgen.virtual.drill import VirtualTiming

#: The version of what ``generated:`` records; a reader bins by it.
GENERATOR_VERSION = 1
#: Signals read per replica: ``expects.replica`` names the one the kind acts on.
REPLICA_SIGNALS = frozenset({"e2e_p50_skew", "e2e_p50_ms"})


def scenario_rng(seed: int, index: int) -> Random:
    """The generator's rng for scenario ``index`` of ``seed`` (a digest, so any integer
    seed, negative or huge, gives an unrelated stream)."""
    digest = hashlib.blake2b(f"tailwatch-generate/{seed}/{index}".encode(), digest_size=8)
    return Random(int.from_bytes(digest.digest(), "big"))


def choose_kind(rng: Random, kinds: Sequence[Kind], benign_share: float) -> Kind:
    """Benign with probability ``benign_share`` when ``kinds`` hold both classes, then one
    of that class uniformly."""
    incidents = [k for k in kinds if not k.is_benign]
    benign = [k for k in kinds if k.is_benign]
    is_benign = rng.random() < benign_share
    pool = (benign if is_benign else incidents) or incidents or benign
    return rng.choice(pool)


def scenario_name(seed: int, index: int, kind: Kind) -> str:
    return f"gen-{seed}-{index:02d}-{kind.name}"


def build_scenario(
    seed: int, index: int, kinds: Sequence[Kind], timing: VirtualTiming, benign_share: float
) -> dict[str, Any]:
    """Scenario ``index`` of ``seed`` (see the module docstring)."""
    rng = scenario_rng(seed, index)
    kind = choose_kind(rng, kinds, benign_share)
    incident = incident_of(kind)
    ranges = kind.ranges
    magnitude = rng.uniform(*ranges.magnitude)
    share = rng.uniform(*ranges.share)
    onset = rng.choice(kind.onsets)
    num_ramp = rng.randint(3, 4) if onset == RAMP else 0
    base = draw_base(
        rng, ranges, rng.randrange(1 << 20), share if kind.share_of == PREFIXED else None
    )
    assert incident.alert is not None and incident.signal is not None
    clock = rule_clock(incident.alert, timing)
    plan = kind.plan(Draw(rng, base, magnitude, share, clock, num_ramp))
    # NOTE: a warm-up of half a window by default: caches fill and queues settle before
    # the baseline the rules compare with
    warmup = max(0.5 * clock.window_seconds, plan.warmup_seconds or 0.0)
    num_ramp_phases = num_ramp * (2 if kind.ramps_down else 1)
    durations = draw_durations(rng, clock, num_ramp_phases, warmup)
    expects: dict[str, Any] = {
        "signal": incident.signal,
        "change": incident.change,
        "factor": expected_factor(kind, plan),
        "alert": None if kind.is_benign else str(kind.alert),
        "triage_cause": None if kind.is_benign else str(kind.cause),
    }
    if incident.signal in REPLICA_SIGNALS:
        expects["replica"] = plan.replica if plan.replica is not None else 0
    generated = {
        "generator": GENERATOR_VERSION,
        "seed": seed,
        "index": index,
        "kind": kind.name,
        "benign": kind.is_benign,
        "resembles": kind.resembles,
        # NOTE: as realised (a whole replica, a KV pool no smaller than one request, a
        # benign peak under 0.75 of capacity bound some draws); ``drawn`` has the draws
        "magnitude": round(plan.magnitude, 4),
        "magnitude_means": kind.magnitude_means,
        "share": round(plan.share, 4),
        "share_means": kind.share_means,
        "drawn": {"magnitude": round(magnitude, 4), "share": round(share, 4)},
        "replicas": base.replicas,
        "model": base.gpu.model,
        "tensor_parallel_size": base.gpu.tensor_parallel_size,
        "decode_step_ms": round(base.decode_step_seconds() * 1000, 3),
        "max_num_seqs": base.max_num_seqs,
        "load": round(base.load, 4),
        # NOTE: of the replicas serving the baseline (a scale-out starts with fewer)
        "capacity_rps": round(base.capacity_rps(len(plan.active) if plan.active else None), 3),
        "rate_rps": round(sum(w["rate"] for w in plan.workloads), 3),
        "onset": onset,
        "ramp_phases": num_ramp_phases,
        "durations": durations.as_mapping(),
        "rule": clock.as_mapping(),
        "long_enough": long_enough(durations, clock),
        "timing": {
            "window_scale": timing.window_scale,
            "evaluation_interval_seconds": timing.evaluation_interval_seconds,
            "scrape_interval_seconds": timing.scrape_interval_seconds,
        },
        "details": plan.details,
    }
    return {
        "name": scenario_name(seed, index, kind),
        "description": _description(kind, plan, base.replicas, base.gpu.model, base.load),
        "teaches": kind.summary,
        "replicas": base.replicas,
        "routing": "round-robin",
        "engine": plan.engine,
        "workloads": plan.workloads,
        "phases": _phases(kind, plan, durations, num_ramp),
        # NOTE: the durations are in units of the virtual drill's windows; the real-time
        # drill's are DrillTiming's, so its compressed form keeps the same proportions
        "compressed": {"time_scale": round(DrillTiming().window_scale / timing.window_scale, 6)},
        # NOTE: the virtual drill runs it as written, on the windows it was sized for
        "virtual": {"time_scale": 1.0, "window_scale": timing.window_scale},
        "expects": expects,
        "generated": generated,
    }


def _phases(kind: Kind, plan: Plan, d: Durations, num_ramp: int) -> list[dict[str, Any]]:
    """warm-up, baseline, ``ramp-N`` up to the perturbation (and ``ramp-down-N`` after it
    for a kind that comes back down), the perturbation at full magnitude, the recovery."""
    active = {"active_replicas": plan.active} if plan.active is not None else {}
    phases: list[dict[str, Any]] = [
        {"name": "warmup", "duration": d.warmup, **active, **plan.start},
        {"name": "baseline", "duration": d.baseline},
    ]
    steps = num_ramp + 1
    for i in range(1, num_ramp + 1):
        phases.append({"name": f"ramp-{i}", "duration": d.ramp, **plan.at_level(i / steps)})
    phases.append({"name": "perturbation", "duration": d.perturbation, **plan.at_level(1.0)})
    if kind.ramps_down:
        for i in range(1, num_ramp + 1):
            level = 1 - i / steps
            phases.append({"name": f"ramp-down-{i}", "duration": d.ramp, **plan.at_level(level)})
    phases.append({"name": "recovery", "duration": d.recovery, **plan.recovery})
    return phases


def _description(kind: Kind, plan: Plan, replicas: int, model: str, load: float) -> str:
    return (
        f"Generated {kind.name}: {kind.summary}. Magnitude {plan.magnitude:.2f}: "
        f"{kind.magnitude_means}. Share {plan.share:.2f}: {kind.share_means}. "
        f"{replicas} x {model}, the baseline at {load:.0%} of its estimated capacity."
    )
