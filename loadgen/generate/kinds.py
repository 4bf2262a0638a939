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
from loadgen.generate import benign, gateway_incidents, gpu_incidents, incidents
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
        "traffic surges past what the fleet serves, its tenants alike",
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
    Kind(
        "adapter-thrash",
        "traffic spreads over more LoRA adapters than stay loaded: rare ones reload",
        "the rare adapters asked for over the loaded set (max_cpu_loras, 2-4)",
        "the traffic moved to the rare adapters",
        TRAFFIC,
        incidents.adapter_thrash,
        Ranges(magnitude=(1.5, 4.0), share=(0.1, 0.4)),
        signal="engine_ttft_p99_ms",
        change="rise",
        factor=lambda magnitude: 1.5,  # NOTE: the plan's: a load in the first-token tail
        alert=AlertName.TAIL_LATENCY_INCIDENT,
        cause=Cause.ADAPTER_THRASH,
    ),
    Kind(
        "cold-start",
        "a scale-out adds replicas that are ready but not warm: slow for their first minutes",
        "how many times as long the new replicas' steps take while cold",
        "the replicas added (under half the fleet)",
        REPLICAS,
        incidents.cold_start,
        # NOTE: three replicas at least: one added stays under half
        Ranges(replicas=(3, 6), share=(0.15, 0.45)),
        onsets=(STEP,),
        signal="engine_itl_p99_ms",
        change="rise",
        factor=_rise,
        alert=AlertName.TAIL_LATENCY_INCIDENT,
        cause=Cause.COLD_START,
    ),
    Kind(
        "structured-truncation",
        "a schema route's answers outgrow max_tokens: its JSON is cut before it closes",
        "how many times the route's share of structured answers cut at max_tokens rises "
        "(from 0.05: 4 to 16 times is 0.2 to 0.8)",
        "the schema route's part of the traffic (at least 1 req/s where there is that much)",
        TRAFFIC,
        incidents.structured_truncation,
        Ranges(magnitude=(4.0, 16.0), share=(0.2, 1.0)),
        signal="structured_length_share",
        change="rise",
        factor=lambda magnitude: 2.0,  # NOTE: twice the baseline, as the rule asks
        alert=AlertName.TRUNCATION_RISE,
        cause=Cause.STRUCTURED_TRUNCATION,
    ),
    Kind(
        "output-length-shift",
        "a model or prompt change makes answers longer at the same arrivals",
        "the fleet's decode work at the longer answers, as a multiple of its estimated "
        "capacity (the answers' scale follows, at most 8 times as long)",
        "the traffic whose answers lengthen",
        TRAFFIC,
        incidents.output_length_shift,
        Ranges(magnitude=(1.5, 3.0), share=(0.5, 1.0), load=(0.3, 0.6)),
        signal="output_tokens_mean",
        change="rise",
        # NOTE: the plan gives half the mean's rise; this is the least any draw makes
        factor=lambda magnitude: 1.25,
        alert=AlertName.QUEUE_GROWTH,
        cause=Cause.OUTPUT_LENGTH_SHIFT,
    ),
    Kind(
        "noisy-tenant",
        "one tenant's traffic takes the fleet past capacity while the others hold theirs",
        "arrivals as a multiple of the fleet's estimated capacity, the excess all the "
        "noisy tenant's",
        "the noisy tenant's part of the baseline traffic",
        TRAFFIC,
        incidents.noisy_tenant,
        # NOTE: a small tenant in the baseline, so its share at the peak rises by over 0.35
        Ranges(share=(0.05, 0.25)),
        signal="queue_time_mean_ms",
        change="rise",
        factor=lambda magnitude: 1 + magnitude,  # NOTE: as overload's
        alert=AlertName.QUEUE_GROWTH,
        cause=Cause.NOISY_TENANT,
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
    Kind(
        "popular-adapter",
        "a new LoRA adapter becomes popular and stays warm (the loaded set has room)",
        "none: it loads once (drawn as 1)",
        "the traffic that moves to it",
        TRAFFIC,
        benign.popular_adapter,
        Ranges(magnitude=(1.0, 1.0), share=(0.1, 0.5)),
        resembles="adapter-thrash",
    ),
    Kind(
        "warm-scale-out",
        "a scale-out adds replicas that warm up before they take traffic",
        "none: they are warm when ready (drawn as 1)",
        "the replicas added (under half the fleet)",
        REPLICAS,
        benign.warm_scale_out,
        Ranges(magnitude=(1.0, 1.0), share=(0.15, 0.45), replicas=(3, 6)),
        onsets=(STEP,),
        resembles="cold-start",
    ),
    Kind(
        "structured-roomy",
        "a schema route's traffic grows, its answers fitting max_tokens as before",
        "the route's growth (the fleet at most 0.75 of capacity)",
        "the schema route's part of the baseline traffic",
        TRAFFIC,
        benign.structured_roomy,
        Ranges(magnitude=(1.2, 2.5), share=(0.2, 1.0)),
        resembles="structured-truncation",
    ),
    Kind(
        "longer-answers-within-capacity",
        "a new model answers a little longer, within capacity",
        "how many times as long the answers get (the fleet's decode work at most 0.75 of capacity)",
        "the traffic whose answers lengthen",
        TRAFFIC,
        benign.longer_answers_within_capacity,
        Ranges(magnitude=(1.2, 2.0), share=(0.3, 1.0)),
        resembles="output-length-shift",
    ),
    Kind(
        "tenant-growth",
        "one tenant grows within capacity while the others hold theirs",
        "the traffic's rise (at most 0.75 of capacity), all of it the growing tenant's",
        "the growing tenant's part of the baseline traffic",
        TRAFFIC,
        benign.tenant_growth,
        Ranges(magnitude=(1.2, 2.5), share=(0.1, 0.5)),
        resembles="noisy-tenant",
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

_GATEWAY_KINDS = (
    Kind(
        "client-gap",
        "a gateway in front of the engines adds a few milliseconds; then its delay steps up "
        "(a saturated proxy, a misrouted region): clients wait, the engines do not",
        "the added delay, in times the engines' estimated first token (at least 20 ms)",
        "none: every request passes the gateway (drawn as 1)",
        TRAFFIC,
        gateway_incidents.client_gap,
        Ranges(magnitude=(2.0, 6.0), share=(1.0, 1.0)),
        signal="ttft_p95_ms",
        change="rise",
        # NOTE: the baseline's p95 is the engines' first token times a few (queueing) plus
        # the overhead; a delay of magnitude first tokens moves it by a quarter of that
        factor=lambda magnitude: 1 + magnitude / 4,
        alert=AlertName.CLIENT_GAP,
        cause=Cause.CLIENT_GAP,
    ),
    Kind(
        "constant-gateway-overhead",
        "a gateway whose added delay is the same before and during: slower first tokens for "
        "the clients than for the engines, but nothing changed",
        "the gateway's constant delay, in times the engines' estimated first token",
        "none: every request passes the gateway (drawn as 1)",
        TRAFFIC,
        gateway_incidents.constant_gateway_overhead,
        Ranges(magnitude=(2.0, 6.0), share=(1.0, 1.0)),
        resembles="client-gap",
    ),
)

KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (*_INCIDENTS, *_BENIGN, *_GPU_INCIDENTS, *_GPU_BENIGN, *_GATEWAY_KINDS)
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
