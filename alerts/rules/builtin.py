"""The built-in rules, the burn-rate rules built from ``slos:``, and :class:`RuleSet`.

Defaults are in one table here and in ``docs/alerts.md`` ("Built-in rules"); ``alerts:`` in
``tailwatch.yaml`` overrides them by rule name (``alerts/rules/config.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from alerts.conventions import SEVERITY_PAGE, SEVERITY_TICKET
from alerts.errors import RuleError
from alerts.rules.sli import LATENCY_FAMILIES, ErrorSLI, LatencySLI
from alerts.rules.types import (
    BurnRateRule,
    ClientGapRule,
    ErrorRateRule,
    GPUHealthRule,
    KVSaturationRule,
    MetricAbsentRule,
    PrefixHitDropRule,
    QueueGrowthRule,
    RatioShiftRule,
    ReplicaImbalanceRule,
    Rule,
    TailLatencyRule,
    TargetDownRule,
)
from alerts.vocabulary import AlertName
from collectors import canonical as c
from slo import (
    ErrorRatioIndicator,
    ErrorSource,
    LatencyIndicator,
    LatencyMetric,
    SLOSpec,
    burn_rate_windows,
)

A = AlertName

#: The name a tail rule's ticket twin for a rise the load explains takes after the rule's own.
WITH_LOAD_SUFFIX = ":with-load"


def load_twins(
    rule: TailLatencyRule, description: str, runbook: str
) -> tuple[TailLatencyRule, TailLatencyRule]:
    """``rule`` for a rise beyond what the load explains (``load: beyond``), and its ticket
    twin ``<name>:with-load`` (with ``description`` and ``runbook``) for the rise the load
    does explain: the fleet serves more, the tail grew with it, and that is capacity to
    plan, not a call."""
    return (
        replace(rule, load="beyond"),
        replace(
            rule,
            name=f"{rule.name}{WITH_LOAD_SUFFIX}",
            severity=SEVERITY_TICKET,
            load="within",
            description=description,
            runbook=runbook,
        ),
    )


#: The built-in rules other than burn rate (which comes from the SLOs) and metric absent
#: (which is built over the families of the rules in the set).
BUILTIN_RULES: tuple[Rule, ...] = (
    # NOTE: no built-in compares a latency with a fixed line: each compares the fleet with
    # its own past (the hour before the window) or with itself (the fleet median), and is
    # guarded by how much evidence there is, so one rule set serves a 7 ms-ITL GPU fleet and
    # a 70 ms one (docs/alerts.md, "Rules that need no tuning"). The ratios are round numbers
    # chosen for what they mean (a tail half again as slow, twice the queueing), not fitted
    # to any drill; bench/detection.py measures them on generated incidents.
    TailLatencyRule(
        name="tail-latency-ttft",
        alert=A.TAIL_LATENCY_INCIDENT,
        # NOTE: a ticket: the first-token tail moves with load even within capacity (bursts
        # queue for a moment; a generated daily ramp to half of capacity took a p99 of 40 ms
        # to 344 ms with the median unmoved); first tokens page through their SLO's burn
        # rate and through the causes' own rules (queue growth, KV saturation)
        severity=SEVERITY_TICKET,
        metric=LatencyMetric.TTFT,
        quantile=0.99,
        rise_min=1.5,
        median_rise_max=1.5,
        for_seconds=120.0,
        # NOTE: a p99 over sparse stalls dips between them, and the median can jump while
        # the tail is worst: hold the page through such gaps instead of resolving and
        # paging again (Prometheus's keep_firing_for)
        keep_firing_for_seconds=120.0,
        summary="TTFT {condition}",
        description="The slowest {tail_percent:g} % of first tokens over {window}: {condition}. "
        "A tail problem (preemption, long prompts, one replica), not overall overload.",
        runbook="tailwatch incident show: compare queue vs prefill share of TTFT, prompt-length "
        "p95 and per-replica TTFT against the baseline.",
    ),
    # NOTE: pages only for a rise beyond what the load explains: more decoded tokens make
    # bigger batches and more prefills between decodes, so traffic that doubled within
    # capacity takes the token-gap tail ~1.5x with it (the bench's busy-gpu-healthy twin);
    # that rise tickets, as capacity to plan, through the twin below
    *load_twins(
        TailLatencyRule(
            name="tail-latency-itl",
            alert=A.TAIL_LATENCY_INCIDENT,
            severity=SEVERITY_PAGE,
            metric=LatencyMetric.ITL,
            quantile=0.99,
            rise_min=1.5,
            median_rise_max=1.5,
            for_seconds=120.0,
            keep_firing_for_seconds=120.0,
            summary="ITL {condition}",
            description="Token gaps over {window}: {condition}. Decodes stall behind long "
            "prefills in the same step.",
            runbook="Check prompt-length p95 against the baseline; lower "
            "max_num_batched_tokens (chunked prefill) to bound a step's prefill.",
        ),
        description="Token gaps over {window}: {condition}. The fleet decodes more tokens "
        "than before and the tail grew with them: headroom is shrinking.",
        runbook="Plan capacity: compare decoded tokens per second with the load test's and "
        "scale out before the tail reaches the SLO.",
    ),
    QueueGrowthRule(
        name=A.QUEUE_GROWTH,
        alert=A.QUEUE_GROWTH,
        severity=SEVERITY_PAGE,
        rise_min=2.0,
        queue_share_min=0.5,
        # NOTE: a mean over 20 requests is steady enough; a p99 needs 100 (1 / (1 - q) of
        # them at the very least)
        min_observations=20.0,
        for_seconds=120.0,
        summary="requests are queueing: the mean wait doubled, dominates TTFT, and builds up",
        description="Over {window}: {condition}. Arrivals exceed what the replicas serve.",
        runbook="Scale out, or bound the queue (max_waiting_requests) so clients get 429 with "
        "Retry-After instead of unbounded waits.",
    ),
    KVSaturationRule(
        name=A.KV_SATURATION,
        alert=A.KV_SATURATION,
        severity=SEVERITY_PAGE,
        for_seconds=120.0,
        summary="KV cache full and preempting",
        description="A replica's KV cache is at least {usage_min:.0%} used while it preempted "
        "at least {preemptions_min:g} requests over {window}, faster than over the "
        "{baseline_window} before: evicted sequences are recomputed.",
        runbook="Give the KV cache more memory (gpu_memory_utilization) or lower max_num_seqs.",
    ),
    PrefixHitDropRule(
        name=A.PREFIX_HIT_DROP,
        alert=A.PREFIX_HIT_DROP,
        severity=SEVERITY_TICKET,
        for_seconds=300.0,
        summary="prefix-cache hit rate fell below {ratio_max:.0%} of its baseline",
        description="The fleet's prefix hit rate over {window} is under {ratio_max:g}x its rate "
        "over the {baseline_window} before: a prompt change broke the shared prefix, or "
        "routing scatters prefix groups.",
        runbook="Compare per-replica hit rates: all down means the prompt changed (restore "
        "prefix-friendly order); spread means routing (use prefix-aware routing).",
    ),
    ReplicaImbalanceRule(
        name=A.REPLICA_IMBALANCE,
        alert=A.REPLICA_IMBALANCE,
        severity=SEVERITY_TICKET,
        # NOTE: the mean (sum over count), not a bucketed p50: vLLM's e2e buckets start at
        # 0.3 s, so short requests on a GPU put every replica's p50 in the first bucket
        signal="e2e_mean",
        # NOTE: below the 1.5x a replica must be caught at, by the noise of a mean of 20
        # requests whose lengths vary (a few percent), not at it
        ratio_min=1.3,
        min_observations=20.0,
        for_seconds=300.0,
        summary="one replica's mean latency is above {ratio_min:g}x the fleet's",
        description="A replica's mean e2e latency over {window} is above {ratio_min:g}x the "
        "fleet median (at least {min_observations:g} requests on it, {replicas_min} replicas).",
        runbook="Drain the slow replica and investigate it (GPU health, noisy neighbour, knobs).",
    ),
    ReplicaImbalanceRule(
        name="replica-imbalance-waiting",
        alert=A.REPLICA_IMBALANCE,
        severity=SEVERITY_TICKET,
        signal="waiting",
        ratio_min=3.0,
        # NOTE: a count, not a latency: a median of 0 waiting makes any queue a ratio
        excess_min=5.0,
        for_seconds=300.0,
        summary="one replica's queue is above {ratio_min:g}x the fleet's",
        description="Over {window} a replica has more than {ratio_min:g}x the fleet-median "
        "waiting requests and more than {excess_min:g} above it.",
        runbook="Check the router's balance and that replica's speed; drain it if it is slow.",
    ),
    ErrorRateRule(
        name=A.ERROR_RATE,
        alert=A.ERROR_RATE,
        severity=SEVERITY_PAGE,
        indicator=ErrorRatioIndicator(ErrorSource.REQUESTS),
        ratio_max=0.05,
        for_seconds=120.0,
        summary="more than {ratio_max:.0%} of requests fail or are shed",
        description="Finished requests with reason error (or rejected at admission) are over "
        "{ratio_max:.0%} of those that finished over {window}.",
        runbook="Errors: engine logs. Rejections/429: overload, see queue-growth; scale out.",
    ),
    TargetDownRule(
        name=A.TARGET_DOWN,
        alert=A.TARGET_DOWN,
        severity=SEVERITY_PAGE,
        for_seconds=60.0,
        summary="an engine target is down",
        description="Scrapes of a target that served engine metrics fail.",
        runbook="Check the engine process and its /metrics endpoint.",
    ),
    GPUHealthRule(
        name=A.GPU_HEALTH,
        alert=A.GPU_HEALTH,
        severity=SEVERITY_TICKET,
        for_seconds=60.0,
        summary="a GPU reports uncorrected ECC errors or thermal/power throttling",
        description="NVML counted new uncorrected ECC errors, or a hardware slowdown, thermal or "
        "power-brake reason holds the clocks down.",
        runbook="ECC: drain the replica and have the GPU checked. Throttling: cooling and power.",
    ),
    # NOTE: a ticket: truncated structured answers are wrong answers, not slow ones, and the
    # fix (max_tokens, the schema) is a change to ship, not a 3 a.m. action. The share of
    # structured requests, not of all: plain requests that run to max_tokens end with
    # ``length`` too, and would hide a schema route's truncation in the whole's share.
    RatioShiftRule(
        name=A.TRUNCATION_RISE,
        alert=A.TRUNCATION_RISE,
        severity=SEVERITY_TICKET,
        numerator=c.STRUCTURED_OUTPUT_FINISHED_TOTAL,
        numerator_matchers={c.LABEL_FINISHED_REASON: "length"},  # type: ignore[arg-type]
        denominator=c.STRUCTURED_OUTPUT_FINISHED_TOTAL,
        direction="rise",
        factor=2.0,
        difference_min=0.05,
        min_denominator=20.0,
        for_seconds=120.0,
        summary="structured outputs cut at max_tokens: the length share is {condition}",
        description="Structured-output requests that ended with finished_reason=length over "
        "{window}: {condition}. Their JSON stopped before the object closed (invalid).",
        runbook="Raise max_tokens on the schema route to the p99 of its output length (vllm:"
        "request_generation_tokens), or bound the schema (maxItems, maxLength).",
    ),
    # NOTE: speculation that stops paying shows first in its acceptance rate: a fall to 0.7
    # of the fleet's own past and 0.1 below it (an n-gram proposer's rate swings with the
    # traffic's repetitiveness by a few points); a ticket, as ITL's own rules page when the
    # cost reaches the latency
    RatioShiftRule(
        name=A.SPEC_ACCEPTANCE_DROP,
        alert=A.SPEC_ACCEPTANCE_DROP,
        severity=SEVERITY_TICKET,
        numerator=c.SPEC_DECODE_ACCEPTED_TOKENS_TOTAL,
        denominator=c.SPEC_DECODE_DRAFT_TOKENS_TOTAL,
        direction="fall",
        factor=0.7,
        difference_min=0.1,
        min_denominator=200.0,
        for_seconds=120.0,
        summary="speculative decoding's draft acceptance rate is {condition}",
        description="Accepted over proposed draft tokens over {window}: {condition}. Every "
        "draft is verified whether or not it is accepted: below its past rate, speculation "
        "costs step time it does not win back.",
        runbook="Lower num_speculative_tokens, or turn speculation off at high load; check "
        "whether the traffic or the draft changed (tailwatch changes list).",
    ),
    # NOTE: the first token as the clients see it (a gateway's or the load generator's
    # /metrics) against the engines' own: half again as slow for the clients while the
    # engines' tail moved at most a fifth is time added in front of the engines. A p95, not a
    # p99: a gateway's delay shifts every request, not a tail. A page: users wait, and no
    # engine rule sees it (the engines' TTFT is flat).
    ClientGapRule(
        name=A.CLIENT_GAP,
        alert=A.CLIENT_GAP,
        severity=SEVERITY_PAGE,
        quantile=0.95,
        rise_min=1.5,
        server_rise_max=1.2,
        for_seconds=120.0,
        summary="first tokens are slow for the clients, not for the engines: {condition}",
        description="Over {window}: {condition}. The time is spent between the engines and "
        "the clients (gateway, router, network, TLS or auth in front).",
        runbook="Compare the gateway's TTFT with the engines' per model; check the gateway's "
        "concurrency and CPU, recent changes in front of the engines, and the network path.",
    ),
)

#: Engine families a metric-absent rule never checks: NVML data exists only on GPU hosts.
#: Families whose absence is no drift: NVML's where no GPU is watched, and the bundled
#: engine's structured-output finishes, which no other engine exports (truncation-rise stays
#: silent on them rather than metric-absent ticketing every vLLM fleet).
_NEVER_ABSENT = frozenset(
    (
        *c.GPU_FAMILIES,
        c.STRUCTURED_OUTPUT_FINISHED_TOTAL,
        # NOTE: a server exports its speculation counters only while it speculates
        c.SPEC_DECODE_ACCEPTED_TOKENS_TOTAL,
        c.SPEC_DECODE_DRAFT_TOKENS_TOTAL,
        # NOTE: client timings exist only where a gateway or the load generator exports them
        c.CLIENT_TTFT_SECONDS,
    )
)


@dataclass(frozen=True)
class RuleSet:
    """Rules with unique names, in order."""

    rules: tuple[Rule, ...]

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for rule in self.rules:
            if rule.name in seen:
                raise RuleError(rule.name, "name", "is used by another rule; names must be unique")
            seen.add(rule.name)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.rules)

    def get(self, name: str) -> Rule | None:
        return next((r for r in self.rules if r.name == name), None)

    def families(self) -> tuple[str, ...]:
        """Every family some rule reads, in first-use order."""
        return tuple(dict.fromkeys(f for r in self.rules for f in r.families()))

    def scaled(self, factor: float) -> RuleSet:
        """Every rule's windows and ``for:`` times ``factor`` (drills, tests)."""
        return RuleSet(tuple(r.scaled(factor) for r in self.rules))


def metric_absent_rule(rules: Iterable[Rule], for_seconds: float = 600.0) -> MetricAbsentRule:
    """The metric-absent rule over every engine family ``rules`` read."""
    families = tuple(
        dict.fromkeys(f for r in rules if not isinstance(r, MetricAbsentRule) for f in r.families())
    )
    return MetricAbsentRule(
        name=AlertName.METRIC_ABSENT,
        alert=AlertName.METRIC_ABSENT,
        severity=SEVERITY_TICKET,
        checked_families=tuple(f for f in families if f not in _NEVER_ABSENT),
        for_seconds=for_seconds,
        summary="a family the alert rules read has no series on any target",
        description="No target exposes a family that alert rules depend on: those rules can "
        "never fire. Usually a renamed metric after an engine upgrade.",
        runbook="tailwatch rules check lists the rules and families; compare with the "
        "engine's /metrics and collectors/dialect_rules.py.",
    )


def burn_rate_rules(slos: Sequence[SLOSpec]) -> tuple[tuple[BurnRateRule, ...], tuple[str, ...]]:
    """A page and a ticket rule per SLO, from ``slo/budget.py``'s workbook table for its
    period; and a note for each SLO that cannot be alerted on from histograms (TPOT: request
    records only), never a silent drop."""
    rules: list[BurnRateRule] = []
    notes: list[str] = []
    for spec in slos:
        indicator = spec.indicator
        if isinstance(indicator, LatencyIndicator):
            if indicator.metric not in LATENCY_FAMILIES:
                notes.append(
                    f"SLO {spec.name!r}: no burn-rate rule: {indicator.metric.value} has no "
                    "histogram (request records only)"
                )
                continue
            sli: LatencySLI | ErrorSLI = LatencySLI(indicator.metric, indicator.threshold_seconds)
        else:
            sli = ErrorSLI(indicator)
        table = burn_rate_windows(spec.period_days)
        for severity in (SEVERITY_PAGE, SEVERITY_TICKET):
            rows = tuple(w for w in table if w.severity == severity)
            rules.append(
                BurnRateRule(
                    name=f"{AlertName.SLO_BURN_RATE}:{spec.name}:{severity}",
                    alert=AlertName.SLO_BURN_RATE,
                    severity=severity,
                    slo=spec.name,
                    sli=sli,
                    target=spec.target,
                    windows=rows,
                    selector=spec.selector,
                    summary="SLO {slo} is burning its error budget too fast ({severity})",
                    description="SLO {slo} (target {target:g}, budget {budget_percent:g} % over "
                    "{period_days:g} d): {rows}",
                    runbook="tailwatch incident show for the cause; the ticket rows can wait "
                    "for working hours.",
                )
            )
    return tuple(rules), tuple(notes)


#: A tail that rose but stays under this share of its SLO's threshold tickets, not pages.
INSIDE_SLO_SHARE = 0.5
#: The name a tail rule's inside-the-SLO ticket twin takes after the rule's own.
INSIDE_SLO_SUFFIX = ":inside-slo"


def slo_severities(rules: Iterable[Rule], slos: Sequence[SLOSpec]) -> tuple[Rule, ...]:
    """``rules`` with each paging tail-latency rule split by its metric's SLO, when one
    (fleet-wide: no model or tenant selector) has a latency threshold: the page holds only
    while the tail is above :data:`INSIDE_SLO_SHARE` of the threshold, and a ticket twin
    (``<name>:inside-slo``) takes the rise that stays well inside it (a tail that tripled
    from 25 to 75 ms under a 500 ms objective is worth a look, not a 3 a.m. call). With
    several such SLOs on one metric, the tightest threshold counts."""
    thresholds: dict[LatencyMetric, float] = {}
    for spec in slos:
        indicator = spec.indicator
        if (
            not isinstance(indicator, LatencyIndicator)
            or spec.selector.model
            or spec.selector.tenant
        ):
            continue
        held = thresholds.get(indicator.metric)
        if held is None or indicator.threshold_seconds < held:
            thresholds[indicator.metric] = indicator.threshold_seconds
    out: list[Rule] = []
    for rule in rules:
        threshold = thresholds.get(rule.metric) if isinstance(rule, TailLatencyRule) else None
        if threshold is None or rule.severity != SEVERITY_PAGE or rule.tail_max_seconds is not None:
            out.append(rule)
            continue
        line = INSIDE_SLO_SHARE * threshold
        page_line = line if rule.threshold_seconds is None else max(line, rule.threshold_seconds)
        out.append(replace(rule, threshold_seconds=page_line))
        out.append(
            replace(
                rule,
                name=f"{rule.name}{INSIDE_SLO_SUFFIX}",
                severity=SEVERITY_TICKET,
                tail_max_seconds=line,
            )
        )
    return tuple(out)


def builtin_rule_set(slos: Sequence[SLOSpec] = ()) -> tuple[RuleSet, tuple[str, ...]]:
    """Burn-rate rules for ``slos``, the :data:`BUILTIN_RULES` (the paging tail rules split
    by their SLOs, :func:`slo_severities`) and metric absent over them; and the notes of
    :func:`burn_rate_rules`."""
    burn, notes = burn_rate_rules(slos)
    rules = (*burn, *slo_severities(BUILTIN_RULES, slos))
    return RuleSet((*rules, metric_absent_rule(rules))), notes


def with_rules(rule_set: RuleSet, rules: Iterable[Rule]) -> RuleSet:
    """``rule_set`` with ``rules`` replacing those of the same name (others appended), and
    metric absent rebuilt over the result (keeping its ``for:`` and text)."""
    by_name = {r.name: r for r in rule_set.rules}
    for rule in rules:
        by_name[rule.name] = rule
    ordered = [r for r in by_name.values() if not isinstance(r, MetricAbsentRule)]
    absent = by_name.get(AlertName.METRIC_ABSENT)
    if isinstance(absent, MetricAbsentRule):
        rebuilt = metric_absent_rule(ordered)
        ordered.append(replace(absent, checked_families=rebuilt.checked_families))
    return RuleSet(tuple(ordered))
