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

import math

from alerts.export.exprs import LAYOUTS, PromRule, snapped_bound
from alerts.export.names import EngineNames
from alerts.export.promql_text import quantile_token
from alerts.export.promtool_series import (
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
    switched,
)
from alerts.rules.base import Rule
from alerts.rules.records import slo_record_labels, slo_record_name
from alerts.rules.sli import ErrorSLI, LatencySLI
from alerts.rules.types import (
    IMBALANCE_FAMILIES,
    BurnRateRule,
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
    windows = sorted({w for r in rules for w in r.window_lengths_seconds()})
    records = [
        (name, evals, [(series(name, slo_record_labels(rules[0].slo, rules[0].sli)), ratio)])
        for name in (slo_record_name(rules[0].slo, w) for w in windows)
    ]
    return _case(
        b, firing, clean, evals, expected, records, [r.annotations() for r in firing_rules]
    )


def _power_of_two_above(x: float) -> float:
    return float(2 ** (math.floor(math.log2(x)) + 1))


def _drop_index(b: Builder, rule: Rule, *windows: float) -> int:
    """The interval at which a relative rule's input changes: after a whole baseline of
    windows (so every baseline value is the calm one)."""
    return math.ceil((sum(windows) + 2 * b.interval) / b.interval - 1e-9)


def _relative_evals(b: Builder, rule: Rule, k: int, window: float, baseline: float) -> float:
    """When to expect the alert: the window whole after the change, ``for:`` and two
    intervals on; refused when the baseline median would already hold the change."""
    evals = b.at_interval(k * b.interval + window + rule.for_seconds + 2 * b.interval)
    if evals - window - k * b.interval >= baseline / 2:
        raise CaseError(
            f"rule {rule.name!r}: for: is too long for its baseline window (the baseline's "
            "median would already hold the incident)"
        )
    return evals


def tail_latency_case(rule: TailLatencyRule, names: EngineNames, alert: PromRule) -> Case:
    b = Builder(names, rule)
    family = rule.families()[0]
    edges = LAYOUTS[family]
    w, base = rule.window_seconds, rule.baseline_window_seconds
    k = _drop_index(b, rule, base, w) if rule.is_relative else 0
    evals = _relative_evals(b, rule, k, w, base) if rule.is_relative else b.eval_after(w)
    n = b.samples(evals)
    # NOTE: a middle edge, so the median's bucket does not start at 0 (its move when a
    # quarter of the observations turn slow stays small); at most the absolute median line
    limit = rule.median_max_seconds
    fast_edges = [e for e in edges if limit is None or e <= limit]
    if not fast_edges:
        raise CaseError(
            f"rule {rule.name!r}: median_max_seconds {limit:g} is below every edge of {family}"
        )
    fast = fast_edges[min(3, len(fast_edges) - 1)]
    # NOTE: tail_share has three decimals, so whole counts need a multiple of 1000.
    per = 1000.0 * b.interval * max(1, math.ceil(rule.min_observations / (1000.0 * w)))
    # NOTE: the slow share is just over the tail the quantile reads, so the quantile lands
    # in the slow bucket and the median stays in the fast one, as little moved as can be
    tail_share = round(1 - rule.quantile, 3) + 0.001
    calm = {fast: per}
    calm_tail = expected_quantile(rule.quantile, family, calm, b.interval)
    above = calm_tail * (rule.rise_min or 1.0)
    if rule.threshold_seconds is not None:
        above = max(above, rule.threshold_seconds)
    slow = edge_above(family, above, skip=1)
    hot = {fast: per * (1 - tail_share), slow: per * tail_share}
    values = [expected_quantile(q, family, hot, b.interval) for q in (rule.quantile, 0.5)]
    calm_median = expected_quantile(0.5, family, calm, b.interval)
    if rule.median_rise_max is not None and values[1] > rule.median_rise_max * calm_median:
        raise CaseError(
            f"rule {rule.name!r}: median_rise_max {rule.median_rise_max:g} is too tight for a bucketed median"
        )
    # NOTE: a rise the load explains (load: within) fires on as many more observations as
    # the tail rose past rise_min (a power of two: the rates' quotient is then exact); the
    # quantiles do not move when every bucket grows alike
    load = 1.0
    if rule.load == "within":
        load = _power_of_two_above(values[0] / (calm_tail * (rule.rise_min or 1.0)))
        hot = {edge: count * load for edge, count in hot.items()}
    # NOTE: a record's last part names what it holds (p99_rate5m); the observations' rate
    # is not checked: rate()'s extrapolation leaves it a rounding off (1000.0000000000001),
    # and promtool compares exactly; the alert firing on it is the check
    expected = {quantile_token(rule.quantile): values[0], quantile_token(0.5): values[1]}
    held = {record: record.rsplit(":", 1)[-1].split("_rate")[0] for record in alert_records(alert)}
    records = [
        (record, evals, [(series(record, {b.model: MODEL}), expected[what])])
        for record, what in held.items()
        if what in expected
    ]
    firing = (
        b.histogram(family, calm, n, then=hot, at=k)
        if rule.is_relative
        else b.histogram(family, hot, n)
    )
    return _case(
        b,
        firing,
        b.histogram(family, calm, n),
        evals,
        [b.expect(**{b.model: MODEL})],
        records,
    )


def queue_growth_case(rule: QueueGrowthRule, names: EngineNames, alert: PromRule) -> Case:
    b = Builder(names, rule)
    w, base = rule.window_seconds, rule.baseline_window_seconds
    relative = rule.rise_min is not None
    k = _drop_index(b, rule, base, w) if relative else 0
    evals = _relative_evals(b, rule, k, w, base) if relative else b.eval_after(w)
    n = b.samples(evals)
    queue = series(b.metric(c.QUEUE_SECONDS, "_sum"), b.labels())
    count = series(b.metric(c.QUEUE_SECONDS, "_count"), b.labels())
    ttft = series(b.metric(c.TTFT_SECONDS, "_sum"), b.labels())
    per = 60.0 * b.interval * max(1, math.ceil(rule.min_observations / (60.0 * w)))
    # NOTE: the calm request waits 1 s of a 4 s TTFT, the queued one its whole TTFT (share
    # 1), a power of two above rise_min times as long: a quotient of rates is exact only
    # when one is a power-of-two multiple of the other
    waited = _power_of_two_above(rule.rise_min or 1.0)
    firing = [
        (queue, switched(per, k, per * waited, n)),
        (count, counter(per, n)),
        (ttft, switched(4 * per, k, per * waited, n)),
    ]
    clean = [(queue, counter(per, n)), (count, counter(per, n)), (ttft, counter(4 * per, n))]
    if (
        rule.waiting_per_replica_min is not None
        or rule.waiting_min is not None
        or rule.growth_min is not None
    ):
        waiting = series(b.metric(c.REQUESTS_WAITING), b.labels())
        steps = w / b.interval
        rise = 2 * (rule.growth_min or 0.0) / steps
        level = max(rule.waiting_min or 0.0, 2 * (rule.waiting_per_replica_min or 0.0))
        firing.append(
            (waiting, f"0x{k} {level:g}+{rise:g}x{n - k - 1}" if k else f"{level:g}+{rise:g}x{n}")
        )
        clean.append((waiting, gauge(0, n)))
        if level <= 0 and rule.growth_min is None:
            raise CaseError(f"rule {rule.name!r}: waiting_min 0 holds for an empty queue")
    mean, share = alert_records(alert)[:2]
    labels = {b.model: MODEL}
    records = [
        (mean, evals, [(series(mean, labels), waited)]),
        (share, evals, [(series(share, labels), 1.0)]),
    ]
    return _case(b, firing, clean, evals, [b.expect(**labels)], records)


def kv_saturation_case(rule: KVSaturationRule, names: EngineNames, alert: PromRule) -> Case:
    b = Builder(names, rule)
    w, base = rule.window_seconds, rule.baseline_window_seconds
    relative = rule.rise_min is not None
    k = _drop_index(b, rule, base, w) if relative else 0
    evals = _relative_evals(b, rule, k, w, base) if relative else b.eval_after(w)
    n = b.samples(evals)
    usage = series(b.metric(c.KV_CACHE_USAGE), b.labels())
    preempt = series(b.metric(c.PREEMPTIONS_TOTAL), b.labels())
    per = max(
        (2 * (rule.preemptions_per_second_min or 0.0) + 1) * b.interval,
        math.ceil(2 * rule.preemptions_min * b.interval / w),
    )
    firing = [
        (usage, gauge(max(rule.usage_min, 0.95), n)),
        (preempt, switched(0, k, per, n)),
    ]
    clean = [(usage, gauge(0.5 * rule.usage_min, n)), (preempt, gauge(0, n))]
    record = alert_records(alert)[0]
    labels = {b.instance: REPLICA, b.model: MODEL}
    records = [(record, evals, [(series(record, labels), per / b.interval)])]
    return _case(b, firing, clean, evals, [b.expect(**labels)], records)


def prefix_hit_drop_case(rule: PrefixHitDropRule, names: EngineNames, alert: PromRule) -> Case:
    b = Builder(names, rule)
    w, base = rule.window_seconds, rule.baseline_window_seconds
    k = _drop_index(b, rule, base, w)  # hits stop here; before it every query hits
    evals = _relative_evals(b, rule, k, w, base)
    n = b.samples(evals)
    per = max(10.0 * b.interval, math.ceil(2 * rule.min_queries * b.interval / w))
    queries = series(b.metric(c.PREFIX_CACHE_QUERIES_TOTAL), b.labels())
    hits = series(b.metric(c.PREFIX_CACHE_HITS_TOTAL), b.labels())
    firing = [(queries, counter(per, n)), (hits, switched(per, k, 0, n))]
    clean = [(queries, counter(per, n)), (hits, counter(per, n))]
    (now,) = alert_records(alert)[:1]
    labels = {b.model: MODEL}
    records = [
        (now, k * b.interval, [(series(now, labels), 1.0)]),
        (now, evals, [(series(now, labels), 0.0)]),
    ]
    return _case(b, firing, clean, evals, [b.expect(**labels)], records)


def ratio_shift_case(rule: RatioShiftRule, names: EngineNames, alert: PromRule) -> Case:
    """The ratio steps from 0 to ``top`` (a rise) or from ``top`` to 0 (a fall) after a whole
    baseline at the other end; the clean input holds it at ``top / 2``. ``top`` is 1 where the
    numerator's series are some of the denominator's (a share), else a power of two at least
    ``difference_min``: both ends exact in binary."""
    b = Builder(names, rule)
    w, base = rule.window_seconds, rule.baseline_window_seconds
    k = _drop_index(b, rule, base, w)
    evals = _relative_evals(b, rule, k, w, base)
    n = b.samples(evals)
    per = max(10.0 * b.interval, math.ceil(2 * rule.min_denominator * b.interval / w))
    per += per % 2  # NOTE: even, so the clean input's half is whole
    label = b.names.label
    num_labels = b.labels(**{label(k_): v for k_, v in rule.numerator_matchers.items()})
    den_labels = b.labels(**{label(k_): v for k_, v in rule.denominator_matchers.items()})
    num = series(b.metric(rule.numerator), num_labels)
    is_share = rule.numerator == rule.denominator and all(
        rule.numerator_matchers.get(k_) == v for k_, v in rule.denominator_matchers.items()
    )
    rise = rule.direction == "rise"
    if is_share:
        # the denominator's other series: the numerator's own labels set to another value
        rest = {label(k_): f"not-{v}" for k_, v in rule.numerator_matchers.items() if k_ not in rule.denominator_matchers}  # fmt: skip
        if not rest:
            raise CaseError(f"rule {rule.name!r}: its numerator selects all of its denominator")
        other = series(b.metric(rule.denominator), {**den_labels, **rest})
        top = 1.0
        if rule.difference_min > top:
            raise CaseError(f"rule {rule.name!r}: a share cannot move by {rule.difference_min:g}")
        before, after = (0.0, per) if rise else (per, 0.0)
        firing = [(num, switched(before, k, after, n)), (other, switched(per - before, k, per - after, n))]  # fmt: skip
        clean = [(num, counter(per / 2, n)), (other, counter(per / 2, n))]
    else:
        top = max(1.0, _power_of_two_above(rule.difference_min))
        den = series(b.metric(rule.denominator), den_labels)
        before, after = (0.0, top * per) if rise else (top * per, 0.0)
        firing = [(num, switched(before, k, after, n)), (den, counter(per, n))]
        clean = [(num, counter(top * per / 2, n)), (den, counter(per, n))]
    (record,) = alert_records(alert)[:1]
    labels = {b.model: MODEL}
    start, end = (0.0, top) if rise else (top, 0.0)
    records = [
        (record, k * b.interval, [(series(record, labels), start)]),
        (record, evals, [(series(record, labels), end)]),
    ]
    return _case(b, firing, clean, evals, [b.expect(**labels)], records)


def replica_imbalance_case(rule: ReplicaImbalanceRule, names: EngineNames, alert: PromRule) -> Case:  # fmt: skip
    b = Builder(names, rule)
    evals = b.eval_after(rule.window_seconds)
    n = b.samples(evals)
    replicas = [f"r{i}:8000" for i in range(1, max(3, rule.replicas_min) + 1)]
    slow_one = replicas[-1]
    record = alert_records(alert)[0]
    per = (
        60.0 * b.interval * max(1, math.ceil(rule.min_observations / (60.0 * rule.window_seconds)))
    )
    firing: list[tuple[str, str]] = []
    clean: list[tuple[str, str]] = []
    values = {}
    family = IMBALANCE_FAMILIES.get(rule.signal)
    if family is not None and rule.signal.endswith("_mean"):
        # NOTE: a power of two, so the quotient of the two rates is exact
        slow = _power_of_two_above(rule.ratio_min + rule.excess_min + 1.0)
        for replica in replicas:
            mean = slow if replica == slow_one else 1.0
            total = series(b.metric(family, "_sum"), b.labels(replica))
            count = series(b.metric(family, "_count"), b.labels(replica))
            firing += [(total, counter(per * mean, n)), (count, counter(per, n))]
            clean += [(total, counter(per, n)), (count, counter(per, n))]
            values[replica] = mean
    elif family is not None:
        first = LAYOUTS[family][0]
        lower = edge_above(family, rule.ratio_min * first + rule.excess_min + first)
        slow_edge = edge_above(family, lower)
        for replica in replicas:
            counts = {slow_edge: per} if replica == slow_one else {first: per}
            firing += b.histogram(family, counts, n, replica)
            clean += b.histogram(family, {first: per}, n, replica)
            values[replica] = expected_quantile(0.5, family, counts, b.interval)
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


def gpu_health_case(rule: GPUHealthRule, names: EngineNames, alert: PromRule) -> Case:
    """None: :func:`alerts.export.exprs.gpu_health` exports nothing, so there is no alert to
    test (NVML families are read by Tailwatch's collector; the evaluator runs the rule)."""
    raise CaseError(f"rule {rule.name!r} is not exported, so promtool has nothing to test")
