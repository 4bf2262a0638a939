"""Each rule kind as Prometheus recording and alerting rules on one engine's real names.

Pure functions from a :class:`alerts.rules.types.Rule` and :class:`EngineNames` to
:class:`PromRule` rows; ``alerts/export/rule_file.py`` groups and writes them. A rule an engine cannot
express raises :class:`Unexportable` with the reason, which the export reports.

Aggregation: fleet rules sum ``by (model_name)``; per-replica rules ``by (instance,
model_name)``; an SLO sums all its traffic (its selector's model, if any, is a matcher).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from alerts.export.names import EngineNames
from alerts.export.promql_text import (
    PromRule,
    Reader,
    Unexportable,
    alert_rule,
    group_name,
    quantile_token,
    quote,
    record_rule,
    selector,
)
from alerts.export.slo import (
    LAYOUTS,
    burn_rate_records,
    error_ratio,
    slo_record_name,
    snapped_bound,
)
from alerts.rules.baseline import MIN_BASELINE_VALUES, baseline_step_seconds
from alerts.rules.client_gap import ClientGapRule
from alerts.rules.records import PREFIX, metric_token, prom_duration
from alerts.rules.sli import LATENCY_FAMILIES
from alerts.rules.types import (
    IMBALANCE_FAMILIES,
    ErrorRateRule,
    GPUHealthRule,
    KVSaturationRule,
    MetricAbsentRule,
    PrefixHitDropRule,
    QueueGrowthRule,
    RatioShiftRule,
    ReplicaImbalanceRule,
    TailLatencyRule,
    TargetDownRule,
)
from collectors import canonical as c

__all__ = [
    "LAYOUTS",
    "PromRule",
    "Unexportable",
    "burn_rate_records",
    "metric_token",
    "quote",
    "slo_record_name",
    "snapped_bound",
]


#: The kinds that compare the window with the median over their baseline window.
RelativeRule = (
    TailLatencyRule | QueueGrowthRule | KVSaturationRule | PrefixHitDropRule | RatioShiftRule
)


def _baseline(record: str, rule: RelativeRule) -> str:
    """The median of ``record`` over the rule's baseline window, ending where its window
    starts, at a fifth of a window's resolution (``alerts.rules.baseline``)."""
    window = prom_duration(rule.window_seconds)
    base = prom_duration(rule.baseline_window_seconds)
    step = prom_duration(baseline_step_seconds(rule.window_seconds))
    return f"quantile_over_time(0.5, {record}[{base}:{step}] offset {window})"


def _baseline_count(record: str, rule: RelativeRule) -> str:
    """How many baseline values the median is over: it needs one window's length of them."""
    window = prom_duration(rule.window_seconds)
    base = prom_duration(rule.baseline_window_seconds)
    step = prom_duration(baseline_step_seconds(rule.window_seconds))
    return f"count_over_time({record}[{base}:{step}] offset {window}) >= {MIN_BASELINE_VALUES}"


def _evidence(by: str, count: str, window: str, minimum: float) -> str:
    """``and`` the group holds at least ``minimum`` observations over the window."""
    return f"and on ({by}) sum by ({by}) (increase({count}[{window}])) >= {float(minimum)!r}"


def quantile_record(
    reader: Reader, rule: TailLatencyRule | ClientGapRule, family: str, q: float
) -> PromRule:
    """The recording rule of ``family``'s ``q`` quantile over ``rule``'s window, by the
    fleet's labels, ``and`` at least ``rule.min_observations`` observations in it."""
    bucket = reader.metric(family, "_bucket")
    return _evidenced_record(
        reader,
        rule,
        family,
        quantile_token(q),
        lambda by, window: (
            f"histogram_quantile({q!r}, sum by ({by}, le) (rate({bucket}[{window}])))"
        ),
    )


def _observations_record(reader: Reader, rule: TailLatencyRule, family: str) -> PromRule:
    """The recording rule of ``family``'s observations per second over ``rule``'s window, by
    the fleet's labels, with the quantile records' evidence (``load``: the load's rise)."""
    count = reader.metric(family, "_count")
    return _evidenced_record(
        reader,
        rule,
        family,
        "observations",
        lambda by, window: f"sum by ({by}) (rate({count}[{window}]))",
    )


def _evidenced_record(
    reader: Reader,
    rule: TailLatencyRule | ClientGapRule,
    family: str,
    what: str,
    head: Callable[[str, str], str],
) -> PromRule:
    """``tailwatch:<rule>:<family>:<what>_rate<window>``: ``head(by, window)`` ``and`` at
    least ``rule.min_observations`` of ``family``'s observations in the window."""
    count = reader.metric(family, "_count")
    window = prom_duration(rule.window_seconds)
    by = reader.fleet()
    name = f"{PREFIX}{metric_token(rule.name)}:{family}:{what}_rate{window}"
    expr = f"{head(by, window)}\n{_evidence(by, count, window, max(rule.min_observations, 1))}"
    return record_rule(reader, group_name(rule), name, expr)


def tail_latency(rule: TailLatencyRule, names: EngineNames) -> list[PromRule]:
    reader = Reader(names, rule)
    family = LATENCY_FAMILIES[rule.metric]
    records = [quantile_record(reader, rule, family, q) for q in (rule.quantile, 0.5)]
    tail, median = records[0].record, records[1].record
    parts = []
    if rule.rise_min is not None:
        parts.append(f"{tail} > {rule.rise_min!r} * {_baseline(tail, rule)}")
    if rule.load is not None and rule.rise_min is not None:
        load = _observations_record(reader, rule, family)
        records.append(load)
        # NOTE: the load's rise, at least 1: a fleet that serves less is not held to less
        explained = (
            f"{rule.rise_min!r} * {_baseline(tail, rule)}\n"
            f"  * clamp_min({load.record} / {_baseline(load.record, rule)}, 1)"
        )
        parts.append(f"{tail} {'<=' if rule.load == 'within' else '>'} {explained}")
    if rule.median_rise_max is not None:
        parts.append(f"{median} <= {rule.median_rise_max!r} * {_baseline(median, rule)}")
    if rule.is_relative:
        parts.append(_baseline_count(tail, rule))
    if rule.threshold_seconds is not None:
        parts.append(f"{tail} > {rule.threshold_seconds!r}")
    if rule.tail_max_seconds is not None:
        parts.append(f"{tail} <= {rule.tail_max_seconds!r}")
    if rule.median_max_seconds is not None:
        parts.append(f"{median} <= {rule.median_max_seconds!r}")
    # NOTE: the first condition's left side is the tail, so the alert's value is the tail
    return [*records, alert_rule(rule, reader, group_name(rule), "\nand ".join(parts))]


def queue_growth(rule: QueueGrowthRule, names: EngineNames) -> list[PromRule]:
    reader = Reader(names, rule)
    window = prom_duration(rule.window_seconds)
    by = reader.fleet()
    token = metric_token(rule.name)
    queue_sum = reader.metric(c.QUEUE_SECONDS, "_sum")
    queue_count = reader.metric(c.QUEUE_SECONDS, "_count")
    ttft_sum = reader.metric(c.TTFT_SECONDS, "_sum")
    mean = record_rule(
        reader,
        group_name(rule),
        f"{PREFIX}{token}:queue_seconds:mean_rate{window}",
        f"sum by ({by}) (rate({queue_sum}[{window}])) / sum by ({by}) (rate({queue_count}[{window}]))\n"
        f"{_evidence(by, queue_count, window, max(rule.min_observations, 1))}",
    )
    share = record_rule(
        reader,
        group_name(rule),
        f"{PREFIX}queue_share_of_ttft:ratio_rate{window}",
        f"sum by ({by}) (rate({queue_sum}[{window}])) / sum by ({by}) (rate({ttft_sum}[{window}]))",
    )
    parts = [f"{mean.record} and {share.record} >= {rule.queue_share_min!r}"]
    if rule.rise_min is not None:
        parts.append(f"{mean.record} > {rule.rise_min!r} * {_baseline(mean.record, rule)}")
        parts.append(_baseline_count(mean.record, rule))
    if rule.waiting_per_replica_min is not None:
        waiting = reader.metric(c.REQUESTS_WAITING)
        parts.append(
            f"avg by ({by}) (avg_over_time({waiting}[{window}])) >= {rule.waiting_per_replica_min!r}"
        )
    if rule.waiting_min is not None or rule.growth_min is not None:
        waiting = reader.metric(c.REQUESTS_WAITING)
        if rule.waiting_min is not None:
            parts.append(f"sum by ({by}) ({waiting}) >= {rule.waiting_min!r}")
        if rule.growth_min is not None:
            parts.append(f"sum by ({by}) (delta({waiting}[{window}])) >= {rule.growth_min!r}")
    return [mean, share, alert_rule(rule, reader, group_name(rule), "\nand ".join(parts))]


def kv_saturation(rule: KVSaturationRule, names: EngineNames) -> list[PromRule]:
    reader = Reader(names, rule)
    window = prom_duration(rule.window_seconds)
    by = reader.replica()
    usage = reader.metric(c.KV_CACHE_USAGE)
    preemptions = reader.metric(c.PREEMPTIONS_TOTAL)
    rate = record_rule(
        reader,
        group_name(rule),
        f"{PREFIX}{metric_token(rule.name)}:{c.PREEMPTIONS_TOTAL}:rate{window}",
        f"sum by ({by}) (rate({preemptions}[{window}]))",
    )
    parts = [
        f"max by ({by}) (max_over_time({usage}[{window}])) >= {rule.usage_min!r}",
        f"sum by ({by}) (increase({preemptions}[{window}])) >= {float(rule.preemptions_min)!r}",
    ]
    if rule.preemptions_per_second_min is not None:
        parts.append(f"{rate.record} > {rule.preemptions_per_second_min!r}")
    expr = "\nand ".join(parts)
    if rule.rise_min is not None:
        # NOTE: ``unless``: a replica with too little history is compared with nothing
        expr += (
            f"\nunless on ({by}) (\n  {rate.record} <= {rule.rise_min!r} * "
            f"{_baseline(rate.record, rule)}\n  and {_baseline_count(rate.record, rule)}\n)"
        )
    return [rate, alert_rule(rule, reader, group_name(rule), expr)]


def prefix_hit_drop(rule: PrefixHitDropRule, names: EngineNames) -> list[PromRule]:
    reader = Reader(names, rule)
    by = reader.fleet()
    hits = reader.metric(c.PREFIX_CACHE_HITS_TOTAL)
    queries = reader.metric(c.PREFIX_CACHE_QUERIES_TOTAL)
    window = prom_duration(rule.window_seconds)
    now = record_rule(
        reader,
        group_name(rule),
        f"{PREFIX}{metric_token(rule.name)}:prefix_cache_hit_rate:ratio_rate{window}",
        f"sum by ({by}) (rate({hits}[{window}])) / sum by ({by}) (rate({queries}[{window}]))\n"
        f"{_evidence(by, queries, window, max(rule.min_queries, 1))}",
    )
    # NOTE: the baseline ends where the window starts, so a drop is not its own baseline
    baseline = _baseline(now.record, rule)
    expr = (
        f"{now.record} < {rule.ratio_max!r} * {baseline}\n"
        f"and {baseline} >= {rule.baseline_hit_rate_min!r}\n"
        f"and {_baseline_count(now.record, rule)}"
    )
    return [now, alert_rule(rule, reader, group_name(rule), expr)]


def ratio_shift(rule: RatioShiftRule, names: EngineNames) -> list[PromRule]:
    reader = Reader(names, rule)
    by = reader.fleet()
    window = prom_duration(rule.window_seconds)

    def counter(family: str, matchers: Mapping[str, str]) -> str:
        metric = reader.metric(family)
        engine = {reader.label(k): v for k, v in matchers.items()}
        return selector(metric, {**reader.matchers(family), **engine})

    num = counter(rule.numerator, rule.numerator_matchers)
    den = counter(rule.denominator, rule.denominator_matchers)
    # NOTE: ``or 0 * ...``: a numerator with no series yet (no request ended with that
    # reason) is a ratio of 0, not a missing one, as the evaluator reads it
    record = record_rule(
        reader,
        group_name(rule),
        f"{PREFIX}{metric_token(rule.name)}:{rule.numerator}:ratio_rate{window}",
        f"(sum by ({by}) (rate({num}[{window}])) or 0 * sum by ({by}) (rate({den}[{window}])))\n"
        f"/ sum by ({by}) (rate({den}[{window}]))\n"
        f"{_evidence(by, den, window, max(rule.min_denominator, 1))}",
    )
    baseline = _baseline(record.record, rule)
    if rule.direction == "rise":
        move = f"{record.record} - {baseline} >= {rule.difference_min!r}"
        parts = [f"{record.record} >= {rule.factor!r} * {baseline}", move]
    else:
        move = f"{baseline} - {record.record} >= {rule.difference_min!r}"
        parts = [f"{record.record} <= {rule.factor!r} * {baseline}", move]
    parts.append(_baseline_count(record.record, rule))
    return [record, alert_rule(rule, reader, group_name(rule), "\nand ".join(parts))]


def replica_imbalance(rule: ReplicaImbalanceRule, names: EngineNames) -> list[PromRule]:
    reader = Reader(names, rule)
    window = prom_duration(rule.window_seconds)
    by, fleet = reader.replica(), reader.fleet()
    family = IMBALANCE_FAMILIES.get(rule.signal)
    if family is not None:
        count = reader.metric(family, "_count")
        evidence = _evidence(by, count, window, max(rule.min_observations, 1))
        if rule.signal.endswith("_mean"):
            total = reader.metric(family, "_sum")
            name = f"{PREFIX}{family}:mean_by_instance_rate{window}"
            expr = (
                f"sum by ({by}) (rate({total}[{window}])) / "
                f"sum by ({by}) (rate({count}[{window}]))\n{evidence}"
            )
        else:
            bucket = reader.metric(family, "_bucket")
            name = f"{PREFIX}{family}:p50_by_instance_rate{window}"
            expr = (
                f"histogram_quantile(0.5, sum by ({by}, le) (rate({bucket}[{window}])))\n{evidence}"
            )
    else:
        waiting = reader.metric(c.REQUESTS_WAITING)
        name = f"{PREFIX}{c.REQUESTS_WAITING}:avg_by_instance_over{window}"
        expr = f"max by ({by}) (avg_over_time({waiting}[{window}]))"
    record = record_rule(reader, group_name(rule), name, expr)
    median = f"quantile by ({fleet}) (0.5, {name})"
    alert = (
        f"{name} > on ({fleet}) group_left () ({rule.ratio_min!r} * {median})\n"
        f"and {name} - on ({fleet}) group_left () {median} > {rule.excess_min!r}\n"
        f"and on ({fleet}) count by ({fleet}) ({name}) >= {rule.replicas_min!r}"
    )
    return [record, alert_rule(rule, reader, group_name(rule), alert)]


def error_rate(rule: ErrorRateRule, names: EngineNames) -> list[PromRule]:
    reader = Reader(names, rule)
    window = prom_duration(rule.window_seconds)
    # NOTE: named by the rule: two error-rate rules may count different outcomes as errors.
    record = record_rule(
        reader,
        group_name(rule),
        f"{PREFIX}{metric_token(rule.name)}:error_ratio_rate{window}",
        error_ratio(reader, rule.sli, {}, window, by=reader.fleet()),
    )
    expr = f"{record.record} > {rule.ratio_max!r}"
    return [record, alert_rule(rule, reader, group_name(rule), expr)]


def target_down(rule: TargetDownRule, names: EngineNames) -> list[PromRule]:
    reader = Reader(names, rule)
    instance = reader.label(c.LABEL_TARGET)
    running = reader.metric(c.REQUESTS_RUNNING)
    # NOTE: the running gauge only picks the engine's targets out of everything Prometheus
    # scrapes; ``up`` itself exists for every target.
    expr = f"up == 0\nand on ({instance}) count by ({instance}) (last_over_time({running}[1h]))"
    return [alert_rule(rule, reader, group_name(rule), expr)]


def gpu_health(rule: GPUHealthRule, names: EngineNames) -> list[PromRule]:
    raise Unexportable(
        f"rule {rule.name!r}: NVML families are read by Tailwatch's collector, not exposed by "
        "any engine; the evaluator runs this rule"
    )


def metric_absent(rule: MetricAbsentRule, names: EngineNames) -> list[PromRule]:
    out = []
    for family in rule.checked_families:
        reader = Reader(names, rule)
        part = "_count" if c.FAMILIES[family] is c.Kind.HISTOGRAM else ""
        try:
            metric = reader.metric(family, part)
        except Unexportable:
            continue  # NOTE: the rules reading it are reported unexportable themselves
        out.append(alert_rule(rule, reader, group_name(rule), f"absent({metric})", family=family, metric=metric))  # fmt: skip
    return out
