"""The names rules, triage and the drills share: built-in alert names, triage causes and the
action each cause recommends. One place, so a scenario's ``expects`` can name what the
evaluator raises and what triage concludes, and a typo is an error rather than a silent miss.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class AlertName(enum.StrEnum):
    """The built-in rules' ``alertname``s (``docs/alerts.md`` describes each)."""

    SLO_BURN_RATE = "slo-burn-rate"
    TAIL_LATENCY_INCIDENT = "tail-latency-incident"
    QUEUE_GROWTH = "queue-growth"
    KV_SATURATION = "kv-saturation"
    PREFIX_HIT_DROP = "prefix-hit-drop"
    REPLICA_IMBALANCE = "replica-imbalance"
    ERROR_RATE = "error-rate"
    TARGET_DOWN = "target-down"
    GPU_HEALTH = "gpu-health"
    METRIC_ABSENT = "metric-absent"
    TRUNCATION_RISE = "truncation-rise"
    SPEC_ACCEPTANCE_DROP = "spec-acceptance-drop"
    CLIENT_GAP = "client-gap"


class Cause(enum.StrEnum):
    """What triage can conclude a latency incident comes from."""

    PREFILL_INTERFERENCE = "prefill-interference"  # long prompts stall every decode in a step
    KV_EXHAUSTION = "kv-exhaustion"  # the KV cache is full: preemption by recompute
    PREFIX_BREAK = "prefix-break"  # a prompt change broke the shared prefix
    PREFIX_SCATTER = "prefix-scatter"  # routing spreads prefix groups over cold replicas
    OVERLOAD = "overload"  # arrivals above capacity: TTFT becomes queueing
    SLOW_REPLICA = "slow-replica"  # one replica is slower than the rest
    CHANGE = "change"  # a change that lines up with the onset: a knob, a deploy, the fleet
    ADAPTER_THRASH = "adapter-thrash"  # more adapters in use than stay loaded: each reloads
    COLD_START = "cold-start"  # replicas that just started serve slowly for their first minutes
    STRUCTURED_TRUNCATION = "structured-truncation"  # JSON cut at max_tokens before it closes
    OUTPUT_LENGTH_SHIFT = "output-length-shift"  # answers got longer at the same arrivals
    NOISY_TENANT = "noisy-tenant"  # one tenant's share of the work concentrates; others wait
    BUSY_IDLE_GPU = "busy-idle-gpu"  # steps slow while the batch stays small: the GPU waits
    SPEC_NOT_PAYING = "spec-not-paying"  # drafts stop being accepted: speculation costs steps
    CLIENT_GAP = "client-server-gap"  # clients wait for first tokens the engines gave long ago


class Direction(enum.StrEnum):
    LOWER = "lower"
    RAISE = "raise"
    CHANGE = "change"


@dataclass(frozen=True)
class Action:
    """What to do about a cause: the knob to turn (an engine or router setting; ``None`` when
    the fix is outside the engine, e.g. the prompt's order), which way, and why."""

    summary: str
    knob: str | None
    direction: Direction | None
    why: str


#: The recommended actions per cause, most direct first.
ACTIONS: dict[Cause, tuple[Action, ...]] = {
    Cause.PREFILL_INTERFERENCE: (
        Action(
            "lower max_num_batched_tokens (chunked prefill)",
            "max_num_batched_tokens",
            Direction.LOWER,
            "a step's prefill tokens delay every decode in it; a smaller budget bounds ITL",
        ),
    ),
    Cause.KV_EXHAUSTION: (
        Action(
            "give the KV cache more memory",
            "gpu_memory_utilization",
            Direction.RAISE,
            "preemption recomputes evicted sequences; more blocks keep them resident",
        ),
        Action(
            "lower max_num_seqs",
            "max_num_seqs",
            Direction.LOWER,
            "fewer concurrent sequences need fewer blocks at once",
        ),
    ),
    Cause.PREFIX_BREAK: (
        Action(
            "restore prefix-friendly prompt order",
            None,
            None,
            "prefix caching matches from the first token: dynamic content goes after the "
            "stable prefix",
        ),
    ),
    Cause.PREFIX_SCATTER: (
        Action(
            "route by prefix (prefix-aware routing)",
            "routing",
            Direction.CHANGE,
            "round-robin spreads each prefix group over every replica, each cold",
        ),
    ),
    Cause.OVERLOAD: (
        Action(
            "scale out",
            "replicas",
            Direction.RAISE,
            "arrivals exceed what the replicas serve; the queue grows until load drops",
        ),
        Action(
            "admission control: lower max_waiting_requests",
            "max_waiting_requests",
            Direction.LOWER,
            "a bounded queue answers 429 with Retry-After instead of queueing without end",
        ),
    ),
    Cause.SLOW_REPLICA: (
        Action(
            "drain the slow replica",
            "active_replicas",
            Direction.LOWER,
            "fleet percentiles hide one bad replica; take it out and investigate it",
        ),
    ),
    Cause.CHANGE: (
        Action(
            "revert the change",
            None,
            None,
            "it lines up with the onset and moves what the incident shows: undoing it is the "
            "quickest test of the hypothesis and the quickest fix",
        ),
    ),
    Cause.ADAPTER_THRASH: (
        Action(
            "raise max_cpu_loras (and max_loras)",
            "max_cpu_loras",
            Direction.RAISE,
            "the adapters in use do not fit the loaded set: each request for an evicted one "
            "waits for its load, and its load stalls the batch beside it",
        ),
        Action(
            "route by adapter (adapter-aware routing)",
            "routing",
            Direction.CHANGE,
            "a replica that serves fewer distinct adapters keeps them all loaded",
        ),
        Action(
            "pre-load the adapters in use",
            None,
            None,
            "a load before ready costs no request its first token",
        ),
    ),
    Cause.COLD_START: (
        Action(
            "warm up before ready",
            "warm_up_seconds",
            Direction.RAISE,
            "a replica that takes traffic before its warm-up (graphs captured, kernels "
            "compiled, caches filled) serves its first minutes slowly",
        ),
        Action(
            "keep a minimum of warm replicas",
            "min_replicas",
            Direction.RAISE,
            "scale-from-zero and scale-out under load put every request on a cold replica",
        ),
        Action(
            "scale up on a schedule, ahead of the load",
            None,
            None,
            "a replica started before the peak is warm when the peak comes",
        ),
    ),
    Cause.STRUCTURED_TRUNCATION: (
        Action(
            "raise max_tokens on the schema route to the p99 of its output length",
            "max_tokens",
            Direction.RAISE,
            "a structured answer cut at max_tokens never closes its object: it is invalid JSON; "
            "the p99 of the route's output tokens (vllm:request_generation_tokens) leaves one "
            "answer in a hundred to the schema bound",
        ),
        Action(
            "bound the schema (maxItems, maxLength, fewer optional fields)",
            None,
            None,
            "a schema that bounds its arrays and strings bounds its answer's length, so a "
            "max_tokens can be chosen that always fits",
        ),
    ),
    Cause.OUTPUT_LENGTH_SHIFT: (
        Action(
            "find the change that lengthened answers (model, prompt, template)",
            None,
            None,
            "the same arrivals now decode longer: each request holds its batch slot and its KV "
            "blocks longer, so concurrency rises until it queues; undo or adjust that change",
        ),
        Action(
            "cap max_tokens",
            "max_tokens",
            Direction.LOWER,
            "a cap bounds each request's decode time and KV, which bounds the concurrency the "
            "same arrivals need",
        ),
    ),
    Cause.NOISY_TENANT: (
        Action(
            "cap the noisy tenant: lower max_concurrency_per_tenant",
            "max_concurrency_per_tenant",
            Direction.LOWER,
            "one tenant holds the batch slots and the queue; a per-tenant cap answers its "
            "excess with 429 and Retry-After while the other tenants keep their latency",
        ),
        Action(
            "priority scheduling: scheduling_policy=priority",
            "scheduling_policy",
            Direction.CHANGE,
            "with the other tenants' requests at a higher priority (X-Priority), the noisy "
            "tenant's requests wait behind them instead of in front",
        ),
        Action(
            "move the tenant to a pool of its own",
            None,
            None,
            "separate replicas isolate its load: scaling out the shared pool feeds it more",
        ),
    ),
    Cause.BUSY_IDLE_GPU: (
        Action(
            "raise max_num_seqs toward the load test's batch",
            "max_num_seqs",
            Direction.RAISE,
            "a memory-bound decode step costs about the same for 4 sequences as for 64: a capped "
            "batch keeps the GPU busy at a fraction of the tokens it could make",
        ),
        Action(
            "raise max_num_batched_tokens",
            "max_num_batched_tokens",
            Direction.RAISE,
            "a small step budget admits few prefills per step: the batch stays small while "
            "requests wait",
        ),
        Action(
            "make decode less memory-bound (quantised weights or KV cache)",
            None,
            None,
            "a decode step reads every weight once: fewer bytes per weight make each step "
            "shorter at the same batch",
        ),
    ),
    Cause.SPEC_NOT_PAYING: (
        Action(
            "lower num_speculative_tokens",
            "speculative_config",
            Direction.LOWER,
            "every step verifies every draft token: drafts that are rejected cost compute and "
            "yield nothing",
        ),
        Action(
            "turn speculation off at high load",
            "speculative_config",
            Direction.CHANGE,
            "speculation trades spare compute for fewer steps; a busy batch has none to spare",
        ),
    ),
    Cause.CLIENT_GAP: (
        Action(
            "look at the gateway in front of the engines (its concurrency, CPU, TLS and auth)",
            None,
            None,
            "the engines gave their first tokens as fast as before; the time was added between "
            "them and the clients: a saturated proxy or router, or a hop added in front",
        ),
        Action(
            "check the network path and the routing region",
            None,
            None,
            "a request routed to a far region, or over a congested link, waits in the network, "
            "where no engine knob reaches",
        ),
    ),
}
