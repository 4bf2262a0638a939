"""Each rule kind as Prometheus recording and alerting rules on one engine's real names.

Pure functions from a :class:`alerts.rules.Rule` and :class:`EngineNames` to
:class:`PromRule` rows; ``alerts/export.py`` groups and writes them. A rule an engine cannot
express raises :class:`Unexportable` with the reason, which the export reports.

Aggregation: fleet rules sum ``by (model_name)``; per-replica rules ``by (instance,
model_name)``; an SLO sums all its traffic (its selector's model, if any, is a matcher).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from alerts.export_names import EngineNames, prom_duration
from alerts.rules import (
    BurnRateRule,
    ErrorRateRule,
    GPUHealthRule,
    KVSaturationRule,
    MetricAbsentRule,
    PrefixHitDropRule,
    QueueGrowthRule,
    ReplicaImbalanceRule,
    Rule,
    TailLatencyRule,
    TargetDownRule,
)
from alerts.sli import ErrorSLI, LatencySLI, SnappedThreshold, snap_threshold
from collectors import canonical as c
from engine.metric_names import BUCKETS
from slo import ErrorSource, LatencyMetric

#: The bucket layouts a latency SLI's threshold snaps to: vLLM 0.33's defaults, which the
#: bundled engine serves too (``engine/metric_names.py``).
LAYOUTS: dict[str, tuple[float, ...]] = {
    c.TTFT_SECONDS: BUCKETS["time_to_first_token"],
    c.ITL_SECONDS: BUCKETS["inter_token_latency"],
    c.E2E_SECONDS: BUCKETS["request_latency"],
}
PREFIX = "tailwatch:"


class Unexportable(ValueError):
    """A rule that cannot be written on an engine's names; the message says why."""


@dataclass(frozen=True)
class PromRule:
    """One Prometheus rule: a recording rule (``record``) or an alerting rule (``alert``).
    ``sources`` are the engine families its expression reads (which engines it applies to)."""

    group: str
    expr: str
    record: str = ""
    alert: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    for_seconds: float = 0.0
    keep_firing_for_seconds: float = 0.0
    sources: tuple[str, ...] = ()
    rule: str = ""


def quote(value: str) -> str:
    """A PromQL double-quoted string."""
    return json.dumps(value, ensure_ascii=False)


def selector(metric: str, matchers: dict[str, str] | None = None, negative: str = "") -> str:
    """``metric{a="x",b=~"y"}``: keys ending in ``~`` are regex matchers."""
    parts = []
    for key, value in (matchers or {}).items():
        op = "=~" if key.endswith("~") else "="
        parts.append(f"{key.rstrip('~')}{op}{quote(value)}")
    if negative:
        parts.append(negative)
    return metric + ("{" + ",".join(parts) + "}" if parts else "")


class _Reader:
    """Names for one rule on one engine; records which engine families were used."""

    def __init__(self, names: EngineNames, rule: Rule) -> None:
        self.names = names
        self.rule = rule
        self.sources: list[str] = []

    def metric(self, family: str, part: str = "") -> str:
        name = self.names.metric(family, part)
        if name is None:
            raise Unexportable(
                f"rule {self.rule.name!r}: {self.names.dialect.value} has no {family} "
                "(collectors/dialect_rules.py)"
            )
        self.sources.append(self.names.source(family) or "")
        return name

    def label(self, canonical: str) -> str:
        return self.names.label(canonical)

    def fleet(self) -> str:
        return self.label(c.LABEL_MODEL)

    def replica(self) -> str:
        return f"{self.label(c.LABEL_TARGET)}, {self.label(c.LABEL_MODEL)}"


def _alert(rule: Rule, reader: _Reader, group: str, expr: str, **labels: str) -> PromRule:
    return PromRule(
        group=group,
        expr=expr,
        alert=rule.alert,
        labels={**rule.alert_labels(), **labels},
        annotations=rule.annotations(),
        for_seconds=rule.for_seconds,
        keep_firing_for_seconds=rule.keep_firing_for_seconds,
        sources=tuple(dict.fromkeys(reader.sources)),
        rule=rule.name,
    )


def _record(reader: _Reader, group: str, name: str, expr: str, **labels: str) -> PromRule:
    return PromRule(
        group=group,
        expr=expr,
        record=name,
        labels=labels,
        sources=tuple(dict.fromkeys(reader.sources)),
        rule=reader.rule.name,
    )


def metric_token(text: str) -> str:
    """``text`` as a piece of a metric name (``[a-zA-Z0-9_]``)."""
    return "".join(ch if ch.isalnum() and ch.isascii() else "_" for ch in text)


def quantile_token(q: float) -> str:
    return "p" + f"{q * 100:g}".replace(".", "_")


def snapped_bound(sli: LatencySLI) -> SnappedThreshold:
    return snap_threshold(sli.threshold_seconds, LAYOUTS[sli.family])


def _le_text(bound: float) -> str:
    from prometheus_client.utils import floatToGoString

    return floatToGoString(bound)


def sli_error_ratio(reader: _Reader, spec: BurnRateRule, window: str) -> str:
    """The SLI's error ratio over ``window`` on the engine's names."""
    base = {}
    if spec.selector.model is not None:
        base[reader.label(c.LABEL_MODEL)] = spec.selector.model
    sli = spec.sli
    if isinstance(sli, LatencySLI):
        bucket = reader.metric(sli.family, "_bucket")
        count = reader.metric(sli.family, "_count")
        le = {**base, c.LABEL_LE: _le_text(snapped_bound(sli).bound_seconds)}
        return (
            f"1 - (sum(rate({selector(bucket, le)}[{window}])) / "
            f"sum(rate({selector(count, base)}[{window}])))"
        )
    return _error_ratio(reader, sli, base, window, by="")


def _error_ratio(reader: _Reader, sli: ErrorSLI, base: dict[str, str], window: str, by: str) -> str:
    metric = reader.metric(sli.family)
    label = reader.label(sli.label)
    group = f" by ({by})" if by else ""
    if sli.indicator.source is ErrorSource.REQUESTS:
        bad = selector(metric, {**base, label + "~": "|".join(sli.bad_reasons())})
        valid = selector(metric, {**base, label + "~": "|".join(sli.valid_reasons())})
    else:
        patterns = sli.code_patterns()
        bad = selector(metric, {**base, label + "~": patterns.bad})
        negative = f"{label}!~{quote(patterns.left_out)}" if patterns.left_out else ""
        valid = selector(metric, {**base, label + "~": patterns.valid}, negative)
    return f"sum{group} (rate({bad}[{window}])) / sum{group} (rate({valid}[{window}]))"


def slo_record_name(slo: str, window_seconds: float) -> str:
    return f"{PREFIX}slo_{metric_token(slo)}:error_ratio_rate{prom_duration(window_seconds)}"


def burn_rate_records(rule: BurnRateRule, names: EngineNames, windows: tuple[float, ...]):
    """The SLI recording rules of one SLO, one per window (Sloth's ``ratio_rate<w>``)."""
    reader = _Reader(names, rule)
    group = f"tailwatch-slo-{metric_token(rule.slo)}-sli"
    out = []
    for seconds in windows:
        expr = sli_error_ratio(reader, rule, prom_duration(seconds))
        out.append(_record(reader, group, slo_record_name(rule.slo, seconds), expr, slo=rule.slo))
    return out


def burn_rate_alert(rule: BurnRateRule, names: EngineNames) -> list[PromRule]:
    if rule.selector.tenant is not None or rule.selector.route is not None:
        raise Unexportable(
            f"rule {rule.name!r}: SLO {rule.slo!r} selects a tenant or route, which "
            f"{names.dialect.value}'s histograms and counters do not carry"
        )
    reader = _Reader(names, rule)
    sli_records = burn_rate_records(rule, names, rule.window_lengths_seconds())
    reader.sources = list(sli_records[0].sources)
    budget = 1.0 - rule.target
    rows = []
    for w in rule.windows:
        limit = f"({w.burn_rate_factor!r} * {budget!r})"
        long_name = slo_record_name(rule.slo, w.long_window_seconds)
        short_name = slo_record_name(rule.slo, w.short_window_seconds)
        rows.append(f"({long_name} > {limit} and {short_name} > {limit})")
    return [_alert(rule, reader, _group(rule), "\nor\n".join(rows))]


def _group(rule: Rule) -> str:
    return f"tailwatch-{metric_token(rule.name)}"


def tail_latency(rule: TailLatencyRule, names: EngineNames) -> list[PromRule]:
    reader = _Reader(names, rule)
    family = {m: f for m, f in ((LatencyMetric.TTFT, c.TTFT_SECONDS), (LatencyMetric.ITL, c.ITL_SECONDS), (LatencyMetric.E2E, c.E2E_SECONDS))}[rule.metric]  # fmt: skip
    bucket = reader.metric(family, "_bucket")
    window = prom_duration(rule.window_seconds)
    records = []
    for q in (rule.quantile, 0.5):
        name = f"{PREFIX}{family}:{quantile_token(q)}_rate{window}"
        expr = (
            f"histogram_quantile({q!r}, sum by ({reader.fleet()}, le) (rate({bucket}[{window}])))"
        )
        records.append(_record(reader, _group(rule), name, expr))
    expr = (
        f"{records[0].record} > {rule.threshold_seconds!r}\n"
        f"and {records[1].record} <= {rule.median_max_seconds!r}"
    )
    return [*records, _alert(rule, reader, _group(rule), expr)]


def queue_growth(rule: QueueGrowthRule, names: EngineNames) -> list[PromRule]:
    reader = _Reader(names, rule)
    window = prom_duration(rule.window_seconds)
    by = reader.fleet()
    waiting = reader.metric(c.REQUESTS_WAITING)
    queue_sum = reader.metric(c.QUEUE_SECONDS, "_sum")
    ttft_sum = reader.metric(c.TTFT_SECONDS, "_sum")
    share = _record(
        reader,
        _group(rule),
        f"{PREFIX}queue_share_of_ttft:ratio_rate{window}",
        f"sum by ({by}) (rate({queue_sum}[{window}])) / sum by ({by}) (rate({ttft_sum}[{window}]))",
    )
    expr = (
        f"sum by ({by}) ({waiting}) >= {rule.waiting_min!r}\nand (\n"
        f"  sum by ({by}) (delta({waiting}[{window}])) >= {rule.growth_min!r}\n"
        f"  or {share.record} >= {rule.queue_share_min!r}\n)"
    )
    return [share, _alert(rule, reader, _group(rule), expr)]


def kv_saturation(rule: KVSaturationRule, names: EngineNames) -> list[PromRule]:
    reader = _Reader(names, rule)
    window = prom_duration(rule.window_seconds)
    by = reader.replica()
    usage = reader.metric(c.KV_CACHE_USAGE)
    preemptions = reader.metric(c.PREEMPTIONS_TOTAL)
    expr = (
        f"max by ({by}) ({usage}) >= {rule.usage_min!r}\n"
        f"and sum by ({by}) (rate({preemptions}[{window}])) > {rule.preemptions_per_second_min!r}"
    )
    return [_alert(rule, reader, _group(rule), expr)]


def prefix_hit_drop(rule: PrefixHitDropRule, names: EngineNames) -> list[PromRule]:
    reader = _Reader(names, rule)
    by = reader.fleet()
    hits = reader.metric(c.PREFIX_CACHE_HITS_TOTAL)
    queries = reader.metric(c.PREFIX_CACHE_QUERIES_TOTAL)
    window = prom_duration(rule.window_seconds)
    base = prom_duration(rule.baseline_window_seconds)
    now = _record(
        reader,
        _group(rule),
        f"{PREFIX}prefix_cache_hit_rate:ratio_rate{window}",
        f"sum by ({by}) (rate({hits}[{window}])) / sum by ({by}) (rate({queries}[{window}]))",
    )
    # NOTE: the baseline ends where the window starts, so a drop is not its own baseline.
    baseline = _record(
        reader,
        _group(rule),
        f"{PREFIX}prefix_cache_hit_rate:ratio_rate{base}_offset{window}",
        f"sum by ({by}) (rate({hits}[{base}] offset {window})) / "
        f"sum by ({by}) (rate({queries}[{base}] offset {window}))",
    )
    expr = (
        f"{now.record} < {rule.ratio_max!r} * {baseline.record}\n"
        f"and {baseline.record} >= {rule.baseline_hit_rate_min!r}"
    )
    return [now, baseline, _alert(rule, reader, _group(rule), expr)]


def replica_imbalance(rule: ReplicaImbalanceRule, names: EngineNames) -> list[PromRule]:
    reader = _Reader(names, rule)
    window = prom_duration(rule.window_seconds)
    by, fleet = reader.replica(), reader.fleet()
    if rule.signal == "e2e_p50":
        bucket = reader.metric(c.E2E_SECONDS, "_bucket")
        name = f"{PREFIX}{c.E2E_SECONDS}:p50_by_instance_rate{window}"
        expr = f"histogram_quantile(0.5, sum by ({by}, le) (rate({bucket}[{window}])))"
    else:
        waiting = reader.metric(c.REQUESTS_WAITING)
        name = f"{PREFIX}{c.REQUESTS_WAITING}:avg_by_instance_over{window}"
        expr = f"max by ({by}) (avg_over_time({waiting}[{window}]))"
    record = _record(reader, _group(rule), name, expr)
    median = f"quantile by ({fleet}) (0.5, {name})"
    alert = (
        f"{name} > on ({fleet}) group_left () ({rule.ratio_min!r} * {median})\n"
        f"and {name} - on ({fleet}) group_left () {median} > {rule.excess_min!r}\n"
        f"and on ({fleet}) count by ({fleet}) ({name}) >= {rule.replicas_min!r}"
    )
    return [record, _alert(rule, reader, _group(rule), alert)]


def error_rate(rule: ErrorRateRule, names: EngineNames) -> list[PromRule]:
    reader = _Reader(names, rule)
    window = prom_duration(rule.window_seconds)
    # NOTE: named by the rule: two error-rate rules may count different outcomes as errors.
    record = _record(
        reader,
        _group(rule),
        f"{PREFIX}{metric_token(rule.name)}:error_ratio_rate{window}",
        _error_ratio(reader, rule.sli, {}, window, by=reader.fleet()),
    )
    expr = f"{record.record} > {rule.ratio_max!r}"
    return [record, _alert(rule, reader, _group(rule), expr)]


def target_down(rule: TargetDownRule, names: EngineNames) -> list[PromRule]:
    reader = _Reader(names, rule)
    instance = reader.label(c.LABEL_TARGET)
    running = reader.metric(c.REQUESTS_RUNNING)
    # NOTE: the running gauge only picks the engine's targets out of everything Prometheus
    # scrapes; ``up`` itself exists for every target.
    expr = f"up == 0\nand on ({instance}) count by ({instance}) (last_over_time({running}[1h]))"
    return [_alert(rule, reader, _group(rule), expr)]


def gpu_health(rule: GPUHealthRule, names: EngineNames) -> list[PromRule]:
    raise Unexportable(
        f"rule {rule.name!r}: NVML families are read by Tailwatch's collector, not exposed by "
        "any engine; the evaluator runs this rule"
    )


def metric_absent(rule: MetricAbsentRule, names: EngineNames) -> list[PromRule]:
    out = []
    for family in rule.checked_families:
        reader = _Reader(names, rule)
        part = "_count" if c.FAMILIES[family] is c.Kind.HISTOGRAM else ""
        try:
            metric = reader.metric(family, part)
        except Unexportable:
            continue  # NOTE: the rules reading it are reported unexportable themselves
        out.append(_alert(rule, reader, _group(rule), f"absent({metric})", family=family, metric=metric))  # fmt: skip
    return out


EXPORTERS = {
    TailLatencyRule: tail_latency,
    QueueGrowthRule: queue_growth,
    KVSaturationRule: kv_saturation,
    PrefixHitDropRule: prefix_hit_drop,
    ReplicaImbalanceRule: replica_imbalance,
    ErrorRateRule: error_rate,
    TargetDownRule: target_down,
    GPUHealthRule: gpu_health,
    MetricAbsentRule: metric_absent,
    BurnRateRule: burn_rate_alert,
}
