"""Synthetic series for ``promtool test rules``: per exported alert, an input that makes it
fire and a clean one that keeps it silent, with the exact labels and annotations expected, and
exact values for the recording rules it reads.

Inputs are built from the rule's own thresholds and windows, so a changed threshold moves the
input with it. Counts per interval are whole numbers and samples sit on the window edges, so
Prometheus's rates are plain quotients (no extrapolation) that Python computes to the same
double; ratios are chosen exact in binary (0.5, 1, 0), since promtool 2.42 compares
``exp_samples`` exactly. Quantile values come from :func:`slo.histogram_quantile`, the
Prometheus-conformant implementation, on the same bucket rates.
"""

from __future__ import annotations

from alerts.export_exprs import LAYOUTS, PromRule, snapped_bound
from alerts.export_names import EngineNames
from alerts.promtool_series import (
    JOB,
    LE,
    MODEL,
    REPLICA,
    Builder,
    Case,
    CaseError,
    alert_records,
    counter,
    edge_above,
    expected_quantile,
    gauge,
    go_float,
    series,
)
from alerts.rules import (
    BurnRateRule,
    ErrorRateRule,
    KVSaturationRule,
    MetricAbsentRule,
    PrefixHitDropRule,
    QueueGrowthRule,
    ReplicaImbalanceRule,
    TailLatencyRule,
    TargetDownRule,
)
from alerts.sli import ErrorSLI, LatencySLI
from collectors import canonical as c
from slo import ErrorSource


def _case(b: Builder, *args: object) -> Case:
    case = Case(*args)  # type: ignore[arg-type]
    case.interval_seconds = b.interval
    return case


def burn_rate_case(rules: list[BurnRateRule], names: EngineNames) -> Case:
    """Half of the SLO's requests bad, for every burn-rate rule of one SLO at once (they share
    the alert name, and promtool compares every alert of a name)."""
    b = Builder(names, rules[0], rules[0].selector.model or MODEL)
    ratio = 0.5
    evals = b.at_interval(max(r.for_seconds for r in rules) + 30 * b.interval)
    n = b.samples(evals)
    sli = rules[0].sli
    per = 60.0 * b.interval
    tenant = rules[0].selector.tenant
    if tenant is not None:
        b.per_tenant, b.extra = True, {c.LABEL_TENANT: tenant}
    if isinstance(sli, LatencySLI):
        bound = snapped_bound(sli).bound_seconds
        bucket = series(b.metric(sli.family, "_bucket"), b.labels(**{LE: go_float(bound)}))
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
    return _case(
        b, firing, clean, evals, expected, records, [r.annotations() for r in firing_rules]
    )


def tail_latency_case(rule: TailLatencyRule, names: EngineNames, alert: PromRule) -> Case:
    b = Builder(names, rule)
    family = rule.families()[0]
    evals = b.eval_after(rule.window_seconds)
    n = b.samples(evals)
    fast_edges = [e for e in LAYOUTS[family] if e <= rule.median_max_seconds]
    if not fast_edges:
        raise CaseError(
            f"rule {rule.name!r}: median_max_seconds {rule.median_max_seconds:g} is below "
            f"every edge of {family}"
        )
    fast = fast_edges[-1]
    slow = edge_above(family, rule.threshold_seconds, skip=1)
    # NOTE: tail_share has three decimals, so whole counts need a multiple of 1000.
    per = 1000.0 * b.interval
    # NOTE: the slow share lies halfway between the tail the quantile reads and the median,
    # so the quantile lands in the slow bucket and the median in the fast one.
    tail_share = round((1 - rule.quantile + 0.5) / 2, 3)
    hot = {fast: per * (1 - tail_share), slow: per * tail_share}
    records = []
    for record, q in zip([r for r in alert_records(alert)], (rule.quantile, 0.5), strict=False):
        value = expected_quantile(q, family, hot, b.interval)
        records.append((record, evals, [(series(record, {b.model: MODEL}), value)]))
    return _case(
        b,
        b.histogram(family, hot, n),
        b.histogram(family, {fast: per}, n),
        evals,
        [b.expect(**{b.model: MODEL})],
        records,
    )


def queue_growth_case(rule: QueueGrowthRule, names: EngineNames, alert: PromRule) -> Case:
    b = Builder(names, rule)
    evals = b.eval_after(rule.window_seconds)
    n = b.samples(evals)
    waiting = series(b.metric(c.REQUESTS_WAITING), b.labels())
    queue = series(b.metric(c.QUEUE_SECONDS, "_sum"), b.labels())
    ttft = series(b.metric(c.TTFT_SECONDS, "_sum"), b.labels())
    steps = rule.window_seconds / b.interval
    rise = 2 * rule.growth_min / steps
    per = 60.0 * b.interval
    firing = [(waiting, f"{rule.waiting_min:g}+{rise:g}x{n}"), (queue, counter(per, n)), (ttft, counter(per, n))]  # fmt: skip
    clean = [(waiting, gauge(0, n)), (queue, gauge(0, n)), (ttft, counter(per, n))]
    if rule.waiting_min <= 0:
        raise CaseError(f"rule {rule.name!r}: waiting_min 0 holds for an empty queue")
    record = alert_records(alert)[0]
    return _case(b, firing, clean, evals, [b.expect(**{b.model: MODEL})],
                [(record, evals, [(series(record, {b.model: MODEL}), 1.0)])])  # fmt: skip


def kv_saturation_case(rule: KVSaturationRule, names: EngineNames, alert: PromRule) -> Case:
    b = Builder(names, rule)
    evals = b.eval_after(rule.window_seconds)
    n = b.samples(evals)
    usage = series(b.metric(c.KV_CACHE_USAGE), b.labels())
    preempt = series(b.metric(c.PREEMPTIONS_TOTAL), b.labels())
    per = (2 * rule.preemptions_per_second_min + 1) * b.interval
    firing = [(usage, gauge(max(rule.usage_min, 0.95), n)), (preempt, counter(per, n))]
    clean = [(usage, gauge(0.5 * rule.usage_min, n)), (preempt, gauge(0, n))]
    return _case(b, firing, clean, evals, [b.expect(**{b.instance: REPLICA, b.model: MODEL})])


def prefix_hit_drop_case(rule: PrefixHitDropRule, names: EngineNames, alert: PromRule) -> Case:
    b = Builder(names, rule)
    w, base, wait = rule.window_seconds, rule.baseline_window_seconds, rule.for_seconds
    drop = base + w  # hits stop here; before it every query hits
    evals = b.at_interval(drop + w + wait + 2 * b.interval)  # fmt: skip
    if evals - w - drop > base * (1 - rule.baseline_hit_rate_min):
        raise CaseError(f"rule {rule.name!r}: for: is too long for its baseline window")
    n = b.samples(evals)
    k = round(drop / b.interval)
    per = 10.0 * b.interval
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
    return _case(b, firing, clean, evals, [b.expect(**labels)], records)


def replica_imbalance_case(rule: ReplicaImbalanceRule, names: EngineNames, alert: PromRule) -> Case:  # fmt: skip
    b = Builder(names, rule)
    evals = b.eval_after(rule.window_seconds)
    n = b.samples(evals)
    replicas = [f"r{i}:8000" for i in range(1, max(3, rule.replicas_min) + 1)]
    slow_one = replicas[-1]
    record = alert_records(alert)[0]
    per = 60.0 * b.interval
    firing: list[tuple[str, str]] = []
    clean: list[tuple[str, str]] = []
    values = {}
    if rule.signal == "e2e_p50":
        first = LAYOUTS[c.E2E_SECONDS][0]
        lower = edge_above(c.E2E_SECONDS, rule.ratio_min * first + rule.excess_min + first)
        slow_edge = edge_above(c.E2E_SECONDS, lower)
        for replica in replicas:
            counts = {slow_edge: per} if replica == slow_one else {first: per}
            firing += b.histogram(c.E2E_SECONDS, counts, n, replica)
            clean += b.histogram(c.E2E_SECONDS, {first: per}, n, replica)
            values[replica] = expected_quantile(0.5, c.E2E_SECONDS, counts, b.interval)
    else:
        metric = b.metric(c.REQUESTS_WAITING)
        for replica in replicas:
            high = rule.ratio_min + rule.excess_min + 1
            values[replica] = high if replica == slow_one else 1.0
            firing.append((series(metric, b.labels(replica)), gauge(values[replica], n)))
            clean.append((series(metric, b.labels(replica)), gauge(1, n)))
    samples = [(series(record, {b.instance: r, b.model: MODEL}), v) for r, v in values.items()]
    records = [(record, evals, samples)]
    return _case(
        b, firing, clean, evals, [b.expect(**{b.instance: slow_one, b.model: MODEL})], records
    )


def error_rate_case(rule: ErrorRateRule, names: EngineNames, alert: PromRule) -> Case:
    b = Builder(names, rule)
    evals = b.eval_after(rule.window_seconds)
    n = b.samples(evals)
    sli = rule.sli
    metric = b.metric(sli.family)
    label = names.label(sli.label)
    good, bad = ("stop", "error") if sli.indicator.source is ErrorSource.REQUESTS else ("200", "500")  # fmt: skip
    good_s, bad_s = (series(metric, b.labels(**{label: v})) for v in (good, bad))
    per = 60.0 * b.interval
    ratio = 0.5 if rule.ratio_max < 0.5 else 1.0
    firing = [(good_s, counter(per * (1 - ratio), n)), (bad_s, counter(per * ratio, n))]
    clean = [(good_s, counter(per, n)), (bad_s, gauge(0, n))]
    record = alert_records(alert)[0]
    labels = {b.model: MODEL}
    records = [(record, evals, [(series(record, labels), ratio)])]
    return _case(b, firing, clean, evals, [b.expect(**labels)], records)


def target_down_case(rule: TargetDownRule, names: EngineNames, alert: PromRule) -> Case:
    b = Builder(names, rule)
    up_at = 10
    evals = (up_at + 2) * b.interval + b.eval_after()
    n = b.samples(evals)
    up = series("up", {"job": JOB, b.instance: REPLICA})
    running = series(b.metric(c.REQUESTS_RUNNING), b.labels())
    firing = [(up, f"1x{up_at} 0x{n - up_at}"), (running, gauge(1, up_at))]
    clean = [(up, gauge(1, n)), (running, gauge(1, n))]
    return _case(b, firing, clean, evals, [b.expect(job=JOB, **{b.instance: REPLICA})])


def metric_absent_case(rule: MetricAbsentRule, names: EngineNames, alert: PromRule) -> Case:
    b = Builder(names, rule)
    evals = b.eval_after()
    n = b.samples(evals)
    metric = alert.labels["metric"]
    other = series("up", {"job": JOB, b.instance: REPLICA})
    firing = [(other, gauge(1, n))]
    clean = [(other, gauge(1, n)), (series(metric, b.labels()), counter(1, n))]
    return _case(b, firing, clean, evals, [b.expect() | {"family": alert.labels["family"], "metric": metric}])  # fmt: skip


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
