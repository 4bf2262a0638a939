"""The kinds of generated scenario, as one table: what each perturbs, what its magnitude and
share mean, the ranges they are drawn from, the onsets it may take, and — for an incident —
the signal it moves, the built-in alert that should page and the cause triage should name.
A benign kind names the incident kind it resembles: its run is timed by that kind's rule and
measures that kind's signal, so the benchmark sees how close a normal day comes to paging.

``docs/loadgen.md`` ("Generated scenarios") tabulates the same; a test holds every entry to
the vocabulary (``alerts.vocabulary``) and the scenario format's signals.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from alerts import AlertName, Cause
from loadgen.generate import benign, gpu_incidents, incidents
from loadgen.generate.base import Ranges
from loadgen.generate.plan import Draw, Plan

STEP, RAMP = "step", "ramp"
#: What a kind's share is of: its traffic, its replicas, or the traffic with a shared
#: prefix (then the draw sets the baseline's prefix share).
TRAFFIC, REPLICAS, PREFIXED = "traffic", "replicas", "prefixed traffic"


@dataclass(frozen=True)
class Kind:
    """One row of :data:`KINDS` (see the module docstring)."""

    name: str
    summary: str
    magnitude_means: str
    share_means: str
    share_of: str
    plan: Callable[[Draw], Plan]
    ranges: Ranges = field(default_factory=Ranges)
    onsets: tuple[str, ...] = (STEP, RAMP)
    #: incidents: the signal, its direction, and its conservative move at a magnitude
    signal: str | None = None
    change: str | None = None
    factor: Callable[[float], float] | None = None
    alert: AlertName | None = None
    cause: Cause | None = None
    #: benign: the incident kind it resembles
    resembles: str | None = None
    #: a ramp that goes back down as it came (phases ``ramp-down-N`` after the peak)
    ramps_down: bool = False

    @property
    def is_benign(self) -> bool:
        return self.resembles is not None


def _rise(magnitude: float) -> float:
    """Half the drawn rise: histogram buckets and Poisson arrivals blur the rest."""
    return 1 + (magnitude - 1) / 2


_INCIDENTS = (
    Kind(
        "prefill-interference",
        "long prompts from batch tenants stall every decode in the steps that prefill them",
        "a step carrying a long prompt's prefill chunk lasts this many times the baseline's "
        "slowest common step, decodes beside one whole chat prompt (ITL p99 rises as much)",
        "long prompts as a share of the baseline's request rate",
        TRAFFIC,
        incidents.prefill_interference,
        Ranges(magnitude=(2.0, 6.0), share=(0.05, 0.3)),
        signal="engine_itl_p99_ms",
        change="rise",
        factor=_rise,
        alert=AlertName.TAIL_LATENCY_INCIDENT,
        cause=Cause.PREFILL_INTERFERENCE,
    ),
    Kind(
        "kv-exhaustion",
        "the usable KV pool of some replicas shrinks under their running set: they preempt",
        "the baseline running set's KV demand over the usable pool it shrinks to",
        "the replicas whose pool shrinks",
        REPLICAS,
        incidents.kv_exhaustion,
        Ranges(load=(0.35, 0.6), max_num_seqs=(16, 32)),
        signal="preemptions",
        change="rise",
        factor=lambda magnitude: 1.0,  # NOTE: from none in the baseline: any preemption
        alert=AlertName.KV_SATURATION,
        cause=Cause.KV_EXHAUSTION,
    ),
    Kind(
        "prefix-break",
        "a release salts the top of the shared system prompt on part of the traffic",
        "the prefix hit rate's fall: 1 - 1/magnitude of the shared-prefix requests are salted",
        "requests that carry a shared prefix",
        PREFIXED,
        incidents.prefix_break,
        Ranges(share=(0.5, 1.0), prefix_blocks=(8, 16)),
        signal="prefix_hit_rate",
        change="fall",
        factor=lambda magnitude: 1 - (1 - 1 / magnitude) / 2,
        alert=AlertName.PREFIX_HIT_DROP,
        cause=Cause.PREFIX_BREAK,
    ),
    Kind(
        "prefix-scatter",
        "an autoscaler adds cold replicas behind round-robin: prefix groups scatter",
        "the fleet's growth (replicas after over before), about the hit rate's first fall",
        "requests that carry a shared prefix",
        PREFIXED,
        incidents.prefix_scatter,
        Ranges(replicas=(2, 6), share=(0.6, 1.0), prefix_blocks=(8, 16)),
        signal="prefix_hit_rate",
        change="fall",
        # NOTE: a third of the drop: the new replicas warm up during the perturbation
        factor=lambda magnitude: 1 - (1 - 1 / magnitude) / 3,
        alert=AlertName.PREFIX_HIT_DROP,
        cause=Cause.PREFIX_SCATTER,
    ),
    Kind(
        "overload",
        "one tenant's traffic surges past what the fleet serves",
        "arrivals as a multiple of the fleet's estimated capacity",
        "the surging tenant's part of the baseline traffic",
        TRAFFIC,
        incidents.overload,
        signal="queue_time_mean_ms",
        change="rise",
        # NOTE: the baseline waits milliseconds, a full queue seconds: 1 + m is far under
        factor=lambda magnitude: 1 + magnitude,
        alert=AlertName.QUEUE_GROWTH,
        cause=Cause.OVERLOAD,
    ),
    Kind(
        "slow-replica",
        "some replicas (a throttled GPU, a noisy neighbour) take longer for every step",
        "how many times as long the slowed replicas' steps take",
        "the replicas slowed (under half the fleet)",
        REPLICAS,
        incidents.slow_replica,
        # NOTE: three replicas at least: replica-imbalance compares one with the median
        Ranges(replicas=(3, 6), share=(0.15, 0.5)),
        signal="e2e_p50_skew",
        change="rise",
        factor=_rise,
        alert=AlertName.REPLICA_IMBALANCE,
        cause=Cause.SLOW_REPLICA,
    ),
)

_BENIGN_RISE = Ranges(magnitude=(1.2, 2.5))
_BENIGN = (
    Kind(
        "traffic-rise",
        "traffic rises and stays, within capacity",
        "the traffic's rise (at most 0.75 of capacity)",
        "the growing stream's part of the baseline traffic",
        TRAFFIC,
        benign.traffic_rise,
        _BENIGN_RISE,
        resembles="overload",
    ),
    Kind(
        "diurnal",
        "a day's curve: traffic ramps up and back down, within capacity",
        "the peak over the baseline (at most 0.75 of capacity)",
        "the stream that follows the day's part of the traffic",
        TRAFFIC,
        benign.diurnal,
        Ranges(magnitude=(1.2, 2.5), share=(0.5, 1.0)),
        onsets=(RAMP,),
        resembles="overload",
        ramps_down=True,
    ),
    Kind(
        "helpful-knob",
        "a live knob is raised where it binds nothing (or helps)",
        "the knob's new value over its old (max_num_seqs or max_num_batched_tokens)",
        "the replicas patched (a canary first)",
        REPLICAS,
        benign.helpful_knob,
        onsets=(STEP,),
        resembles="prefill-interference",
    ),
    Kind(
        "noop-deploy",
        "a deploy changes a limit no request reaches at this load",
        "the new limit over the most it could bind at (the waiting queue's bound, or a "
        "replica's sequences plus its queue for a per-tenant cap)",
        "the replicas deployed to",
        REPLICAS,
        benign.noop_deploy,
        onsets=(STEP,),
        resembles="slow-replica",
    ),
    Kind(
        "replica-restart",
        "replicas restart (a deploy, an OOM) and recover with cold caches",
        "none: a restart is whole (drawn as 1)",
        "the replicas restarted (under half the fleet)",
        REPLICAS,
        benign.replica_restart,
        Ranges(magnitude=(1.0, 1.0), share=(0.1, 0.4)),
        onsets=(STEP,),
        resembles="prefix-scatter",
    ),
    Kind(
        "new-tenant",
        "a new tenant starts sending, within capacity",
        "its prompts' length past its shared prefix over the baseline's",
        "its rate over the baseline's (the fleet stays at most 0.75 of capacity)",
        TRAFFIC,
        benign.new_tenant,
        Ranges(magnitude=(1.0, 2.0), share=(0.1, 0.5)),
        resembles="prefill-interference",
    ),
)

_GPU_INCIDENTS = (
    Kind(
        "busy-idle-gpu",
        "max_num_seqs caps the batch near the baseline's; then every replica's memory-bound "
        "steps slow down: the GPU reads busy while requests wait",
        "how many times as long every replica's steps take",
        "none: every replica slows (drawn as 1)",
        REPLICAS,
        gpu_incidents.busy_idle_gpu,
        Ranges(magnitude=(2.0, 4.0), share=(1.0, 1.0)),
        signal="queue_time_mean_ms",
        change="rise",
        # NOTE: as overload's: the baseline waits milliseconds, a capped batch seconds
        factor=lambda magnitude: 1 + magnitude,
        alert=AlertName.QUEUE_GROWTH,
        cause=Cause.BUSY_IDLE_GPU,
    ),
    Kind(
        "spec-not-paying",
        "a fleet that speculates at a load it needs speculation for: its drafts stop being "
        "accepted",
        "how many times fewer tokens a step yields (the acceptance rate falls from 0.7)",
        "none: every replica's drafts (drawn as 1)",
        REPLICAS,
        gpu_incidents.spec_not_paying,
        # NOTE: at 0.9 to 1.2 of what the fleet serves without speculation: four drafts at
        # 0.7 make each step yield 2.8 tokens, so the baseline is comfortable; a step that
        # yields 1.1 to 1.4 is not
        Ranges(magnitude=(2.0, 2.5), share=(1.0, 1.0), load=(0.9, 1.2)),
        signal="queue_time_mean_ms",
        change="rise",
        factor=lambda magnitude: 1 + magnitude,
        alert=AlertName.QUEUE_GROWTH,
        cause=Cause.SPEC_NOT_PAYING,
    ),
)
_GPU_BENIGN = (
    Kind(
        "busy-gpu-healthy",
        "the GPU gets busier because there is more to do: traffic rises within capacity and "
        "the batch grows with it",
        "the traffic's rise (at most 0.75 of capacity)",
        "the growing stream's part of the baseline traffic",
        TRAFFIC,
        gpu_incidents.busy_gpu_healthy,
        _BENIGN_RISE,
        resembles="busy-idle-gpu",
    ),
    Kind(
        "spec-low-load",
        "the drafts' acceptance rate falls at a low load: more steps per request, nobody waits",
        "how many times fewer tokens a step yields (the acceptance rate falls from 0.7)",
        "none: every replica's drafts (drawn as 1)",
        REPLICAS,
        gpu_incidents.spec_low_load,
        Ranges(magnitude=(2.0, 2.5), share=(1.0, 1.0), load=(0.1, 0.3)),
        resembles="spec-not-paying",
    ),
)

KINDS: dict[str, Kind] = {
    kind.name: kind for kind in (*_INCIDENTS, *_BENIGN, *_GPU_INCIDENTS, *_GPU_BENIGN)
}


def incident_of(kind: Kind) -> Kind:
    """The incident kind whose rule times ``kind`` and whose signal it measures (itself
    for an incident)."""
    return KINDS[kind.resembles] if kind.resembles is not None else kind


def expected_factor(kind: Kind, plan: Plan) -> float:
    """``expects.factor``: an incident's conservative move at its magnitude (or what its
    plan bounds it to); for a benign kind, the smallest its resembled incident expects (a
    benign run that moves that much moved its signal like a mild incident)."""
    incident = incident_of(kind)
    assert incident.factor is not None
    if incident is not kind:
        return round(incident.factor(incident.ranges.magnitude[0]), 4)
    if plan.factor is not None:
        return round(plan.factor, 4)
    return round(incident.factor(plan.magnitude), 4)


def _check_table() -> None:
    """Every benign kind resembles an incident; every incident has its signal and names."""
    for kind in KINDS.values():
        incident = incident_of(kind)
        missing = [
            f
            for f in ("signal", "change", "factor", "alert", "cause")
            if getattr(incident, f) is None
        ]
        if missing or incident.is_benign:
            raise ValueError(f"kind {kind.name!r}: {incident.name!r} lacks {missing}")
        low, high = kind.ranges.magnitude
        if not 0 < low <= high or not 0 < kind.ranges.share[0] <= kind.ranges.share[1] <= 1:
            raise ValueError(f"kind {kind.name!r}: bad magnitude or share range")


_check_table()
