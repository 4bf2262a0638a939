"""Each rule kind evaluated over a :class:`MetricsReader` at one time: the alert expression's
output vector, as :class:`~alerts.rule_read.Instance`\\ s (labels, value, condition holds).

The conditions are those of the exported PromQL (``alerts/export_exprs.py``, the table in
``docs/alerts.md``): fleet rules per ``model``, per-replica rules per ``target`` (and
``model``), a burn-rate rule per SLO. No data gives no instance (PromQL: an empty vector), and a
NaN value never holds. Errors of the store's reads (a bucket layout change inside a window,
series that cannot be merged) propagate: the evaluator records them per rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from alerts.burn_rate_rule import BurnRateRule
from alerts.errors import RuleError
from alerts.rule_base import Rule
from alerts.rule_eval_replica import gpu_health, kv_saturation, replica_imbalance, target_down
from alerts.rule_read import FLEET_LABELS, Instance, groups, increases_by_label, latest_readings
from alerts.rules import (
    ErrorRateRule,
    GPUHealthRule,
    KVSaturationRule,
    MetricAbsentRule,
    PrefixHitDropRule,
    QueueGrowthRule,
    ReplicaImbalanceRule,
    TailLatencyRule,
    TargetDownRule,
)
from alerts.sli import LATENCY_FAMILIES, ErrorSLI, LatencySLI
from collectors import canonical as c
from collectors.store.protocols import MetricsReader
from slo import merge_histograms

__all__ = ["EVALUATORS", "Instance", "evaluate_rule"]


def tail_latency(rule: TailLatencyRule, reader: MetricsReader, now: float) -> list[Instance]:
    family = LATENCY_FAMILIES[rule.metric]
    out = []
    for key, selector in groups(reader, family, FLEET_LABELS).items():
        window = reader.histogram_window(family, selector, now - rule.window_seconds, now)
        if window is None or not window.cumulative_counts[-1]:
            continue
        tail = window.quantile(rule.quantile).value
        median = window.quantile(0.5).value
        holds = (
            tail > rule.threshold_seconds
            and median <= rule.median_max_seconds
            and window.cumulative_counts[-1] >= rule.min_observations
        )
        out.append(Instance(dict(key), tail, holds))
    return out


def queue_growth(rule: QueueGrowthRule, reader: MetricsReader, now: float) -> list[Instance]:
    start = now - rule.window_seconds
    out = []
    for key, selector in groups(reader, c.REQUESTS_WAITING, FLEET_LABELS).items():
        waiting = sum(latest_readings(reader, c.REQUESTS_WAITING, selector, now).values())
        growth = 0.0
        for samples in reader.samples(c.REQUESTS_WAITING, selector, start, now).values():
            if len(samples) >= 2:  # NOTE: delta() needs two readings in the range
                growth += samples[-1].value - samples[0].value
        queue = reader.histogram_window(c.QUEUE_SECONDS, selector, start, now)
        ttft = reader.histogram_window(c.TTFT_SECONDS, selector, start, now)
        share = math.nan
        if (
            queue is not None
            and ttft is not None
            and queue.sum_value is not None
            and ttft.sum_value
        ):
            share = queue.sum_value / ttft.sum_value
        holds = waiting >= rule.waiting_min and (
            growth >= rule.growth_min or share >= rule.queue_share_min
        )
        out.append(Instance(dict(key), waiting, holds))
    return out


def _hit_rate(reader: MetricsReader, selector: dict[str, str], start: float, end: float) -> float:
    hits = reader.counter_window(c.PREFIX_CACHE_HITS_TOTAL, selector, start, end)
    queries = reader.counter_window(c.PREFIX_CACHE_QUERIES_TOTAL, selector, start, end)
    if hits is None or not queries:
        return math.nan
    return hits / queries


def prefix_hit_drop(rule: PrefixHitDropRule, reader: MetricsReader, now: float) -> list[Instance]:
    split = now - rule.window_seconds
    out = []
    for key, selector in groups(reader, c.PREFIX_CACHE_QUERIES_TOTAL, FLEET_LABELS).items():
        current = _hit_rate(reader, selector, split, now)
        # NOTE: the baseline ends where the window starts, so a drop is not its own baseline.
        baseline = _hit_rate(reader, selector, split - rule.baseline_window_seconds, split)
        if math.isnan(current) or math.isnan(baseline):
            continue
        holds = current < rule.ratio_max * baseline and baseline >= rule.baseline_hit_rate_min
        out.append(Instance(dict(key), current, holds))
    return out


def error_rate(rule: ErrorRateRule, reader: MetricsReader, now: float) -> list[Instance]:
    sli = rule.sli
    out = []
    for key, selector in groups(reader, sli.family, FLEET_LABELS).items():
        increases = increases_by_label(
            reader, sli.family, sli.label, selector, now - rule.window_seconds, now
        )
        ratio = sli.error_ratio(increases)
        if math.isnan(ratio):
            continue
        out.append(Instance(dict(key), ratio, ratio > rule.ratio_max))
    return out


def _slo_selector(rule: BurnRateRule) -> dict[str, str]:
    if rule.selector.route is not None:
        raise RuleError(rule.name, "selector", "an SLO on a route: no stored series carry one")
    selector = {}
    if rule.selector.model is not None:
        selector[c.LABEL_MODEL] = rule.selector.model
    if rule.selector.tenant is not None:
        selector[c.LABEL_TENANT] = rule.selector.tenant
    return selector


def _window_error_ratio(
    rule: BurnRateRule, reader: MetricsReader, selector: dict[str, str], start: float, end: float
) -> float:
    sli = rule.sli
    if isinstance(sli, LatencySLI):
        window = reader.histogram_window(sli.family, selector, start, end)
        return math.nan if window is None else sli.error_ratio(window)[0]
    assert isinstance(sli, ErrorSLI)
    return sli.error_ratio(increases_by_label(reader, sli.family, sli.label, selector, start, end))


#: The most steps one burn-rate read may take before falling back to a read per window.
_MAX_BURN_STEPS = 5000


def common_step(lengths: tuple[float, ...]) -> float | None:
    """The largest step every window length is a whole multiple of, when they are whole
    seconds and the longest takes at most ``_MAX_BURN_STEPS`` steps; else None."""
    if not lengths or not all(float(x).is_integer() and x > 0 for x in lengths):
        return None
    step = math.gcd(*(int(x) for x in lengths))
    return float(step) if max(lengths) / step <= _MAX_BURN_STEPS else None


def _suffix_sums(values: list, lengths: tuple[float, ...], step: float, add) -> dict:  # type: ignore[no-untyped-def]
    """For each length, ``add`` over the last ``length / step`` non-None step values (None when
    every one is None)."""
    out = {}
    for length in lengths:
        n = round(length / step)
        chosen = [v for v in values[len(values) - n :] if v is not None]
        out[length] = add(chosen) if chosen else None
    return out


def _stepped_error_ratios(
    rule: BurnRateRule, reader: MetricsReader, selector: dict[str, str], now: float, step: float
) -> dict[float, float]:
    """Every window's error ratio from one step-series read over the longest window: the
    windows end at ``now``, so each is the sum of the last steps (exact windows add up), and the
    store reads each roll-up minute once instead of once per window."""
    sli, lengths = rule.sli, rule.window_lengths_seconds()
    start = now - max(lengths)
    if isinstance(sli, LatencySLI):
        steps = reader.histogram_series(sli.family, selector, start, now, step)
        merged = _suffix_sums([h for _, h in steps], lengths, step, merge_histograms)
        return {
            length: math.nan if h is None else sli.error_ratio(h)[0] for length, h in merged.items()
        }
    assert isinstance(sli, ErrorSLI)
    values = sorted(
        {dict(i.labels).get(sli.label, "") for i in reader.series(sli.family, selector)}
    )
    increases: dict[float, dict[str, float]] = {length: {} for length in lengths}
    for value in (v for v in values if v):
        steps = reader.counter_series(sli.family, {**selector, sli.label: value}, start, now, step)
        for length, total in _suffix_sums([v for _, v in steps], lengths, step, sum).items():
            if total is not None:
                increases[length][value] = total
    return {length: sli.error_ratio(by_value) for length, by_value in increases.items()}


def burn_rate(rule: BurnRateRule, reader: MetricsReader, now: float) -> list[Instance]:
    """One instance for the SLO; its value is the highest burn rate of a row, taken as the
    lower of the row's long and short burn rates (what must exceed the row's factor)."""
    selector = _slo_selector(rule)
    step = common_step(rule.window_lengths_seconds())
    if step is not None:
        ratios = _stepped_error_ratios(rule, reader, selector, now, step)
    else:
        ratios = {
            length: _window_error_ratio(rule, reader, selector, now - length, now)
            for length in rule.window_lengths_seconds()
        }
    if all(math.isnan(r) for r in ratios.values()):
        return []
    checks = rule.evaluate(ratios)
    burns = [min(k.long_burn_rate, k.short_burn_rate) for k in checks]
    value = max((b for b in burns if not math.isnan(b)), default=math.nan)
    return [Instance({}, value, any(k.is_firing for k in checks))]


def metric_absent(rule: MetricAbsentRule, reader: MetricsReader, now: float) -> list[Instance]:
    """One instance per checked family with no series at all (``absent()``: 1 when absent,
    nothing otherwise)."""
    return [
        Instance({"family": family}, 1.0, True)
        for family in rule.checked_families
        if not reader.series(family)
    ]


EVALUATORS: dict[type[Rule], Callable[..., list[Instance]]] = {
    BurnRateRule: burn_rate,
    TailLatencyRule: tail_latency,
    QueueGrowthRule: queue_growth,
    KVSaturationRule: kv_saturation,
    PrefixHitDropRule: prefix_hit_drop,
    ReplicaImbalanceRule: replica_imbalance,
    ErrorRateRule: error_rate,
    TargetDownRule: target_down,
    GPUHealthRule: gpu_health,
    MetricAbsentRule: metric_absent,
}


def evaluate_rule(rule: Rule, reader: MetricsReader, now: float) -> list[Instance]:
    """The output vector of ``rule``'s expression at ``now``. Raises what the reads raise
    (``LayoutChangeError``, ``LayoutMismatchError``, ``SemanticsMismatchError``) and a
    :class:`RuleError` for a rule kind without an evaluation."""
    evaluate = EVALUATORS.get(type(rule))
    if evaluate is None:
        raise RuleError(rule.name, "kind", f"no evaluation for kind {rule.kind!r}")
    return evaluate(rule, reader, now)
