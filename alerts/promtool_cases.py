"""Synthetic series for ``promtool test rules``: per exported alert, an input that makes it
fire and a clean one that keeps it silent, with the exact labels and annotations expected, and
exact values for the recording rules it reads.

Inputs are built from the rule's own thresholds and windows, so a changed threshold moves the
input with it. Counts per interval are multiples of the interval in seconds, so every rate is
an integer per second and every expected value is exact in binary (promtool 2.42 compares
``exp_samples`` exactly). Quantile values come from :func:`slo.histogram_quantile`, the
Prometheus-conformant implementation, on the same bucket rates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from alerts.export_exprs import LAYOUTS, PromRule, quote, snapped_bound
from alerts.export_names import EngineNames
from alerts.rules import (
    BurnRateRule,
    ErrorRateRule,
    KVSaturationRule,
    MetricAbsentRule,
    PrefixHitDropRule,
    QueueGrowthRule,
    ReplicaImbalanceRule,
    Rule,
    TailLatencyRule,
    TargetDownRule,
)
from alerts.sli import ErrorSLI, LatencySLI
from collectors import canonical as c
from slo import ErrorSource, histogram_quantile

INTERVAL_SECONDS = 60.0
REPLICA = "r1:8000"
MODEL = "m"
JOB = "vllm"
_LE = "le"


class CaseError(ValueError):
    """The rule's thresholds admit no synthetic input (e.g. a threshold past the layout)."""


@dataclass
class Case:
    """Input series (``(series, values)`` in promtool's notation) that fire the alert, and
    clean ones; the evaluation time; the labels of every alert expected at that time; and
    ``(expr, eval seconds, series, value)`` checks of recording rules on the firing input."""

    firing: list[tuple[str, str]]
    clean: list[tuple[str, str]]
    eval_seconds: float
    expected: list[dict[str, str]]
    records: list[tuple[str, float, list[tuple[str, float]]]] = field(default_factory=list)
    #: Annotations per expected alert; empty: every one has the exported alert's.
    annotations: list[dict[str, str]] = field(default_factory=list)
    interval_seconds: float = INTERVAL_SECONDS


def series(metric: str, labels: dict[str, str]) -> str:
    inner = ",".join(f"{k}={quote(v)}" for k, v in sorted(labels.items()))
    return f"{metric}{{{inner}}}"


def counter(per_interval: float, samples: int) -> str:
    return f"0+{per_interval:g}x{samples}"


def gauge(value: float, samples: int) -> str:
    return f"{value:g}x{samples}"


class _Builder:
    def __init__(self, names: EngineNames, rule: Rule, model: str = MODEL) -> None:
        self.names, self.rule, self.model_value = names, rule, model
        self.model = names.label(c.LABEL_MODEL)
        self.instance = names.label(c.LABEL_TARGET)

    def labels(self, instance: str = REPLICA, **extra: str) -> dict[str, str]:
        return {
            "job": JOB,
            self.instance: instance,
            self.model: self.model_value,
            "engine": "0",
            **extra,
        }

    def metric(self, family: str, part: str = "") -> str:
        name = self.names.metric(family, part)
        assert name is not None, family
        return name

    def samples(self, eval_seconds: float) -> int:
        return int(eval_seconds // INTERVAL_SECONDS) + 2

    def eval_after(self, *windows: float) -> float:
        """A whole number of intervals past every window and the ``for:``."""
        seconds = max(windows, default=0.0) + self.rule.for_seconds + 2 * INTERVAL_SECONDS
        return math.ceil(seconds / INTERVAL_SECONDS) * INTERVAL_SECONDS

    def expect(self, **series_labels: str) -> dict[str, str]:
        return {**series_labels, **self.rule.alert_labels()}

    def histogram(
        self, family: str, counts: dict[float, float], samples: int, instance: str = REPLICA
    ) -> list[tuple[str, str]]:
        """Bucket series of ``family``'s layout: ``counts`` maps an edge to the observations
        per interval in that bucket (not cumulative)."""
        edges = (*LAYOUTS[family], math.inf)
        out, running = [], 0.0
        for edge in edges:
            running += counts.get(edge, 0.0)
            le = "+Inf" if edge == math.inf else _go(edge)
            labels = self.labels(instance, **{_LE: le})
            out.append((series(self.metric(family, "_bucket"), labels), counter(running, samples)))
        out.append((series(self.metric(family, "_count"), self.labels(instance)), counter(running, samples)))  # fmt: skip
        return out


def _go(value: float) -> str:
    from prometheus_client.utils import floatToGoString

    return floatToGoString(value)


def _quantile(q: float, family: str, counts: dict[float, float]) -> float:
    """The value histogram_quantile gives for per-interval bucket counts (rates per second)."""
    running, buckets = 0.0, []
    for edge in (*LAYOUTS[family], math.inf):
        running += counts.get(edge, 0.0)
        buckets.append((edge, running / INTERVAL_SECONDS))
    return histogram_quantile(q, buckets).value


def _edge_above(family: str, seconds: float, skip: int = 0) -> float:
    edges = [e for e in LAYOUTS[family] if e > seconds]
    if len(edges) <= skip:
        raise CaseError(f"no bucket edge of {family} above {seconds:g} s")
    return edges[skip]


def burn_rate_case(rules: list[BurnRateRule], names: EngineNames) -> Case:
    """Half of the SLO's requests bad, for every burn-rate rule of one SLO at once (they share
    the alert name, and promtool compares every alert of a name)."""
    b = _Builder(names, rules[0], rules[0].selector.model or MODEL)
    ratio = 0.5
    evals = max(r.for_seconds for r in rules) + 30 * INTERVAL_SECONDS
    n = b.samples(evals)
    sli = rules[0].sli
    per = 60.0 * INTERVAL_SECONDS
    if isinstance(sli, LatencySLI):
        bound = snapped_bound(sli).bound_seconds
        bucket = series(b.metric(sli.family, "_bucket"), b.labels(**{_LE: _go(bound)}))
        count = series(b.metric(sli.family, "_count"), b.labels())
        firing = [(bucket, counter(per * (1 - ratio), n)), (count, counter(per, n))]
        clean = [(bucket, counter(per, n)), (count, counter(per, n))]
    else:
        assert isinstance(sli, ErrorSLI)
        metric = b.metric(sli.family)
        label = names.label(sli.label)
        good, bad = ("stop", "error") if sli.indicator.source is ErrorSource.REQUESTS else ("200", "500")  # fmt: skip
        good_s, bad_s = (series(metric, b.labels(**{label: v})) for v in (good, bad))
        firing = [(good_s, counter(per * (1 - ratio), n)), (bad_s, counter(per * ratio, n))]
        clean = [(good_s, counter(per, n)), (bad_s, gauge(0, n))]
    firing_rules = [
        r
        for r in rules
        if any(w.burn_rate_factor * (1 - r.target) < ratio * (1 - 1e-9) for w in r.windows)
    ]
    expected = [r.alert_labels() for r in firing_rules]
    from alerts.export_exprs import slo_record_name

    windows = sorted({w for r in rules for w in r.window_lengths_seconds()})
    records = [
        (name, evals, [(series(name, {"slo": rules[0].slo}), ratio)])
        for name in (slo_record_name(rules[0].slo, w) for w in windows)
    ]
    return Case(firing, clean, evals, expected, records, [r.annotations() for r in firing_rules])


def tail_latency_case(rule: TailLatencyRule, names: EngineNames, alert: PromRule) -> Case:
    b = _Builder(names, rule)
    family = rule.families()[0]
    evals = b.eval_after(rule.window_seconds)
    n = b.samples(evals)
    fast = max([e for e in LAYOUTS[family] if e <= rule.median_max_seconds] or [LAYOUTS[family][0]])  # fmt: skip
    slow = _edge_above(family, rule.threshold_seconds, skip=1)
    per = 60.0 * INTERVAL_SECONDS
    # NOTE: the slow share lies halfway between the tail the quantile reads and the median,
    # so the quantile lands in the slow bucket and the median in the fast one.
    tail_share = round((1 - rule.quantile + 0.5) / 2, 3)
    hot = {fast: per * (1 - tail_share), slow: per * tail_share}
    records = []
    for record, q in zip([r for r in alert_records(alert)], (rule.quantile, 0.5), strict=False):
        value = _quantile(q, family, hot)
        records.append((record, evals, [(series(record, {b.model: MODEL}), value)]))
    return Case(
        b.histogram(family, hot, n),
        b.histogram(family, {fast: per}, n),
        evals,
        [b.expect(**{b.model: MODEL})],
        records,
    )


def alert_records(alert: PromRule) -> list[str]:
    """The ``tailwatch:`` recording rules an alert expression reads, in order of appearance."""
    import re

    return list(dict.fromkeys(re.findall(r"tailwatch:[A-Za-z0-9_:]+", alert.expr)))


def queue_growth_case(rule: QueueGrowthRule, names: EngineNames, alert: PromRule) -> Case:
    b = _Builder(names, rule)
    evals = b.eval_after(rule.window_seconds)
    n = b.samples(evals)
    waiting = series(b.metric(c.REQUESTS_WAITING), b.labels())
    queue = series(b.metric(c.QUEUE_SECONDS, "_sum"), b.labels())
    ttft = series(b.metric(c.TTFT_SECONDS, "_sum"), b.labels())
    steps = rule.window_seconds / INTERVAL_SECONDS
    rise = 2 * rule.growth_min / steps
    per = 60.0 * INTERVAL_SECONDS
    firing = [(waiting, f"{rule.waiting_min:g}+{rise:g}x{n}"), (queue, counter(per, n)), (ttft, counter(per, n))]  # fmt: skip
    clean = [(waiting, gauge(0, n)), (queue, gauge(0, n)), (ttft, counter(per, n))]
    if rule.waiting_min <= 0:
        raise CaseError(f"rule {rule.name!r}: waiting_min 0 holds for an empty queue")
    record = alert_records(alert)[0]
    return Case(firing, clean, evals, [b.expect(**{b.model: MODEL})],
                [(record, evals, [(series(record, {b.model: MODEL}), 1.0)])])  # fmt: skip


def kv_saturation_case(rule: KVSaturationRule, names: EngineNames, alert: PromRule) -> Case:
    b = _Builder(names, rule)
    evals = b.eval_after(rule.window_seconds)
    n = b.samples(evals)
    usage = series(b.metric(c.KV_CACHE_USAGE), b.labels())
    preempt = series(b.metric(c.PREEMPTIONS_TOTAL), b.labels())
    per = (2 * rule.preemptions_per_second_min + 1) * INTERVAL_SECONDS
    firing = [(usage, gauge(max(rule.usage_min, 0.95), n)), (preempt, counter(per, n))]
    clean = [(usage, gauge(0.5 * rule.usage_min, n)), (preempt, gauge(0, n))]
    return Case(firing, clean, evals, [b.expect(**{b.instance: REPLICA, b.model: MODEL})])


def prefix_hit_drop_case(rule: PrefixHitDropRule, names: EngineNames, alert: PromRule) -> Case:
    b = _Builder(names, rule)
    w, base, wait = rule.window_seconds, rule.baseline_window_seconds, rule.for_seconds
    drop = base + w  # hits stop here; before it every query hits
    evals = math.ceil((drop + w + wait + 2 * INTERVAL_SECONDS) / INTERVAL_SECONDS) * INTERVAL_SECONDS  # fmt: skip
    if evals - w - drop > base * (1 - rule.baseline_hit_rate_min):
        raise CaseError(f"rule {rule.name!r}: for: is too long for its baseline window")
    n = b.samples(evals)
    k = int(drop // INTERVAL_SECONDS)
    per = 10.0 * INTERVAL_SECONDS
    queries = series(b.metric(c.PREFIX_CACHE_QUERIES_TOTAL), b.labels())
    hits = series(b.metric(c.PREFIX_CACHE_HITS_TOTAL), b.labels())
    firing = [(queries, counter(per, n)), (hits, f"0+{per:g}x{k} {per * k:g}x{n - k}")]
    clean = [(queries, counter(per, n)), (hits, counter(per, n))]
    now, baseline = alert_records(alert)[:2]
    labels = {b.model: MODEL}
    records = [
        (now, drop, [(series(now, labels), 1.0)]),
        (baseline, drop, [(series(baseline, labels), 1.0)]),
        (now, evals, [(series(now, labels), 0.0)]),
    ]
    return Case(firing, clean, evals, [b.expect(**labels)], records)


def replica_imbalance_case(rule: ReplicaImbalanceRule, names: EngineNames, alert: PromRule) -> Case:  # fmt: skip
    b = _Builder(names, rule)
    evals = b.eval_after(rule.window_seconds)
    n = b.samples(evals)
    replicas = [f"r{i}:8000" for i in range(1, max(3, rule.replicas_min) + 1)]
    slow_one = replicas[-1]
    record = alert_records(alert)[0]
    per = 60.0 * INTERVAL_SECONDS
    firing: list[tuple[str, str]] = []
    clean: list[tuple[str, str]] = []
    values = {}
    if rule.signal == "e2e_p50":
        first = LAYOUTS[c.E2E_SECONDS][0]
        lower = _edge_above(c.E2E_SECONDS, rule.ratio_min * first + rule.excess_min + first)
        slow_edge = _edge_above(c.E2E_SECONDS, lower)
        for replica in replicas:
            counts = {slow_edge: per} if replica == slow_one else {first: per}
            firing += b.histogram(c.E2E_SECONDS, counts, n, replica)
            clean += b.histogram(c.E2E_SECONDS, {first: per}, n, replica)
            values[replica] = _quantile(0.5, c.E2E_SECONDS, counts)
    else:
        metric = b.metric(c.REQUESTS_WAITING)
        for replica in replicas:
            high = rule.ratio_min + rule.excess_min + 1
            values[replica] = high if replica == slow_one else 1.0
            firing.append((series(metric, b.labels(replica)), gauge(values[replica], n)))
            clean.append((series(metric, b.labels(replica)), gauge(1, n)))
    samples = [(series(record, {b.instance: r, b.model: MODEL}), v) for r, v in values.items()]
    records = [(record, evals, samples)]
    return Case(firing, clean, evals, [b.expect(**{b.instance: slow_one, b.model: MODEL})], records)


def error_rate_case(rule: ErrorRateRule, names: EngineNames, alert: PromRule) -> Case:
    b = _Builder(names, rule)
    evals = b.eval_after(rule.window_seconds)
    n = b.samples(evals)
    sli = rule.sli
    metric = b.metric(sli.family)
    label = names.label(sli.label)
    good, bad = ("stop", "error") if sli.indicator.source is ErrorSource.REQUESTS else ("200", "500")  # fmt: skip
    good_s, bad_s = (series(metric, b.labels(**{label: v})) for v in (good, bad))
    per = 60.0 * INTERVAL_SECONDS
    ratio = 0.5 if rule.ratio_max < 0.5 else 1.0
    firing = [(good_s, counter(per * (1 - ratio), n)), (bad_s, counter(per * ratio, n))]
    clean = [(good_s, counter(per, n)), (bad_s, gauge(0, n))]
    record = alert_records(alert)[0]
    labels = {b.model: MODEL}
    records = [(record, evals, [(series(record, labels), ratio)])]
    return Case(firing, clean, evals, [b.expect(**labels)], records)


def target_down_case(rule: TargetDownRule, names: EngineNames, alert: PromRule) -> Case:
    b = _Builder(names, rule)
    up_at = 10
    evals = (up_at + 2) * INTERVAL_SECONDS + b.eval_after()
    n = b.samples(evals)
    up = series("up", {"job": JOB, b.instance: REPLICA})
    running = series(b.metric(c.REQUESTS_RUNNING), b.labels())
    firing = [(up, f"1x{up_at} 0x{n - up_at}"), (running, gauge(1, up_at))]
    clean = [(up, gauge(1, n)), (running, gauge(1, n))]
    return Case(firing, clean, evals, [b.expect(job=JOB, **{b.instance: REPLICA})])


def metric_absent_case(rule: MetricAbsentRule, names: EngineNames, alert: PromRule) -> Case:
    b = _Builder(names, rule)
    evals = b.eval_after()
    n = b.samples(evals)
    metric = alert.labels["metric"]
    other = series("up", {"job": JOB, b.instance: REPLICA})
    firing = [(other, gauge(1, n))]
    clean = [(other, gauge(1, n)), (series(metric, b.labels()), counter(1, n))]
    return Case(firing, clean, evals, [b.expect() | {"family": alert.labels["family"], "metric": metric}])  # fmt: skip


CASES = {
    TailLatencyRule: tail_latency_case,
    QueueGrowthRule: queue_growth_case,
    KVSaturationRule: kv_saturation_case,
    PrefixHitDropRule: prefix_hit_drop_case,
    ReplicaImbalanceRule: replica_imbalance_case,
    ErrorRateRule: error_rate_case,
    TargetDownRule: target_down_case,
    MetricAbsentRule: metric_absent_case,
}
