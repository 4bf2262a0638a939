"""Each rule kind evaluated over a :class:`MetricsReader` at one time: the alert expression's
output vector, as :class:`~alerts.rules.read.Instance`\\ s (labels, value, condition holds).

The conditions are those of the exported PromQL (``alerts/export/exprs.py``, the table in
``docs/alerts.md``): fleet rules per ``model``, per-replica rules per ``target`` (and
``model``), a burn-rate rule per SLO. No data gives no instance (PromQL: an empty vector), and a
NaN value never holds. Errors of the store's reads (a bucket layout change inside a window,
series that cannot be merged) propagate: the evaluator records them per rule.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

from alerts.errors import RuleError
from alerts.rules.baseline import baseline_histograms, baseline_increases, median, observations
from alerts.rules.burn_rate import BurnRateRule
from alerts.rules.read import (
    FLEET_LABELS,
    LOOKBACK_SECONDS,
    Instance,
    groups,
    increases_by_label,
    latest_readings,
)
from alerts.rules.records import slo_record_labels, slo_record_name
from alerts.rules.sli import LATENCY_FAMILIES, SLI, ErrorSLI, LatencySLI
from alerts.rules.types import (
    ErrorRateRule,
    MetricAbsentRule,
    PrefixHitDropRule,
    QueueGrowthRule,
    RatioShiftRule,
    TailLatencyRule,
)
from collectors import canonical as c
from collectors.store.protocols import MetricsReader
from slo import ClassicHistogram, merge_histograms

__all__ = [
    "Instance",
    "burn_rate",
    "error_rate",
    "metric_absent",
    "prefix_hit_drop",
    "queue_growth",
    "ratio_shift",
    "tail_latency",
]


def _evidenced(
    windows: list[ClassicHistogram | None], min_observations: float
) -> list[ClassicHistogram | None]:
    """The windows with enough observations (the others count as no data)."""
    floor = max(min_observations, 1)
    return [w if observations(w) >= floor else None for w in windows]


def tail_latency(rule: TailLatencyRule, reader: MetricsReader, now: float) -> list[Instance]:
    """Per model: the tail over the window against the median of its values over the
    baseline (``alerts.rules.baseline``) when the rule is relative, and against its fixed
    lines when it has them. A window without ``min_observations``, or a baseline without
    enough windows that have them, gives no instance: nothing to compare (PromQL: the
    ``and`` drops the element)."""
    family = LATENCY_FAMILIES[rule.metric]
    split = now - rule.window_seconds
    out = []
    for key, selector in groups(reader, family, FLEET_LABELS).items():
        window = reader.histogram_window(family, selector, split, now)
        if window is None or observations(window) < max(rule.min_observations, 1):
            continue
        tail = window.quantile(rule.quantile).value
        median_now = window.quantile(0.5).value
        holds = True
        if rule.is_relative:
            past = _evidenced(
                baseline_histograms(
                    reader,
                    family,
                    selector,
                    split,
                    rule.window_seconds,
                    rule.baseline_window_seconds,
                ),
                rule.min_observations,
            )
            base_tail = median(None if h is None else h.quantile(rule.quantile).value for h in past)
            base_median = median(None if h is None else h.quantile(0.5).value for h in past)
            if math.isnan(base_tail) or math.isnan(base_median):
                continue
            if rule.rise_min is not None:
                holds = holds and tail > rule.rise_min * base_tail
            if rule.load is not None and rule.rise_min is not None:
                # NOTE: the windows are one length, so their counts' ratio is the rates'
                load = observations(window) / median(
                    None if h is None else observations(h) for h in past
                )
                explained = tail <= rule.rise_min * base_tail * max(1.0, load)
                holds = holds and (explained if rule.load == "within" else not explained)
            if rule.median_rise_max is not None:
                holds = holds and median_now <= rule.median_rise_max * base_median
        if rule.threshold_seconds is not None:
            holds = holds and tail > rule.threshold_seconds
        if rule.tail_max_seconds is not None:
            holds = holds and tail <= rule.tail_max_seconds
        if rule.median_max_seconds is not None:
            holds = holds and median_now <= rule.median_max_seconds
        out.append(Instance(dict(key), tail, holds))
    return out


def _queue_mean(window: ClassicHistogram | None) -> float:
    count = observations(window)
    if window is None or not count or window.sum_value is None:
        return math.nan
    return window.sum_value / count


def queue_growth(rule: QueueGrowthRule, reader: MetricsReader, now: float) -> list[Instance]:
    """Per model: the mean queue time and the queue share of TTFT over the window, the mean
    against the median of its baseline values (when relative), and the waiting queue's
    level and growth (when the rule sets those lines). The value is the window's mean queue
    time (seconds)."""
    start = now - rule.window_seconds
    out = []
    for key, selector in groups(reader, c.QUEUE_SECONDS, FLEET_LABELS).items():
        queue = reader.histogram_window(c.QUEUE_SECONDS, selector, start, now)
        ttft = reader.histogram_window(c.TTFT_SECONDS, selector, start, now)
        if observations(queue) < max(rule.min_observations, 1):
            continue
        mean = _queue_mean(queue)
        share = math.nan
        if (
            queue is not None
            and ttft is not None
            and queue.sum_value is not None
            and ttft.sum_value
        ):
            share = queue.sum_value / ttft.sum_value
        holds = share >= rule.queue_share_min
        if rule.rise_min is not None:
            past = baseline_histograms(
                reader,
                c.QUEUE_SECONDS,
                selector,
                start,
                rule.window_seconds,
                rule.baseline_window_seconds,
            )
            base = median(_queue_mean(h) for h in _evidenced(past, rule.min_observations))
            if math.isnan(base):
                continue
            holds = holds and mean > rule.rise_min * base
        if rule.waiting_per_replica_min is not None:
            means = [
                statistics.fmean(x.value for x in samples)
                for samples in reader.samples(c.REQUESTS_WAITING, selector, start, now).values()
                if samples
            ]
            # NOTE: avg by (model) (avg_over_time(...)): a replica without readings is none
            holds = (
                holds and bool(means) and statistics.fmean(means) >= rule.waiting_per_replica_min
            )
        if rule.waiting_min is not None or rule.growth_min is not None:
            waiting = sum(latest_readings(reader, c.REQUESTS_WAITING, selector, now).values())
            growth = 0.0
            for samples in reader.samples(c.REQUESTS_WAITING, selector, start, now).values():
                if len(samples) >= 2:  # NOTE: delta() needs two readings in the range
                    growth += samples[-1].value - samples[0].value
            if rule.waiting_min is not None:
                holds = holds and waiting >= rule.waiting_min
            if rule.growth_min is not None:
                holds = holds and growth >= rule.growth_min
        out.append(Instance(dict(key), mean, bool(holds)))
    return out


def _hit_rate(
    reader: MetricsReader, selector: dict[str, str], start: float, end: float
) -> tuple[float, float]:
    """(hits / queries, queries) over ``[start, end]``; NaN without queries."""
    hits = reader.counter_window(c.PREFIX_CACHE_HITS_TOTAL, selector, start, end)
    queries = reader.counter_window(c.PREFIX_CACHE_QUERIES_TOTAL, selector, start, end)
    if hits is None or not queries:
        return math.nan, 0.0
    return hits / queries, queries


def prefix_hit_drop(rule: PrefixHitDropRule, reader: MetricsReader, now: float) -> list[Instance]:
    """Per model: the window's hit rate against the median of the windowed hit rates over
    the baseline (``alerts.rules.baseline``), each over at least ``min_queries`` looked-up
    tokens. A median, not the baseline pooled: a fleet's first minutes (cold caches) in the
    pooled hour pulled its baseline down and hid a scale-out's dip."""
    split = now - rule.window_seconds
    floor = max(rule.min_queries, 1)
    out = []
    for key, selector in groups(reader, c.PREFIX_CACHE_QUERIES_TOTAL, FLEET_LABELS).items():
        current, queried = _hit_rate(reader, selector, split, now)
        if math.isnan(current) or queried < floor:
            continue
        # NOTE: the baseline ends where the window starts, so a drop is not its own baseline.
        hits, queries = (
            baseline_increases(
                reader, family, selector, split, rule.window_seconds, rule.baseline_window_seconds
            )
            for family in (c.PREFIX_CACHE_HITS_TOTAL, c.PREFIX_CACHE_QUERIES_TOTAL)
        )
        rates = [
            h / q if h is not None and q is not None and q >= floor else None
            for h, q in zip(hits, queries, strict=True)
        ]
        baseline = median(rates)
        if math.isnan(baseline):
            continue
        holds = current < rule.ratio_max * baseline and baseline >= rule.baseline_hit_rate_min
        out.append(Instance(dict(key), current, holds))
    return out


def _ratio_window(
    rule: RatioShiftRule, reader: MetricsReader, selector: dict[str, str], start: float, end: float
) -> tuple[float, float]:
    """(numerator / denominator, denominator) over ``[start, end]``; NaN without a
    denominator. A numerator without series counts as 0 (PromQL: ``or 0 * denominator``)."""
    den = reader.counter_window(
        rule.denominator, {**selector, **rule.denominator_matchers}, start, end
    )
    if not den:
        return math.nan, 0.0
    num = reader.counter_window(rule.numerator, {**selector, **rule.numerator_matchers}, start, end)
    return (num or 0.0) / den, den


def ratio_shift(rule: RatioShiftRule, reader: MetricsReader, now: float) -> list[Instance]:
    """Per model: the window's ratio against the median of the windowed ratios over the
    baseline (``alerts.rules.baseline``), each over at least ``min_denominator`` of the
    denominator's increase. The value is the window's ratio."""
    split = now - rule.window_seconds
    floor = max(rule.min_denominator, 1)
    out = []
    den_labels = dict(rule.denominator_matchers) or None
    for key, selector in groups(reader, rule.denominator, FLEET_LABELS, den_labels).items():
        selector = {k: v for k, v in selector.items() if k not in rule.denominator_matchers}
        current, counted = _ratio_window(rule, reader, selector, split, now)
        if math.isnan(current) or counted < floor:
            continue
        # NOTE: the baseline ends where the window starts, so a shift is not its own baseline.
        nums, dens = (
            baseline_increases(
                reader,
                family,
                {**selector, **matchers},
                split,
                rule.window_seconds,
                rule.baseline_window_seconds,
            )
            for family, matchers in (
                (rule.numerator, rule.numerator_matchers),
                (rule.denominator, rule.denominator_matchers),
            )
        )
        if len(nums) != len(dens):  # NOTE: a numerator without series reads no steps
            nums = [None] * len(dens)
        ratios = [
            (n or 0.0) / d if d is not None and d >= floor else None
            for n, d in zip(nums, dens, strict=True)
        ]
        baseline = median(ratios)
        if math.isnan(baseline):
            continue
        if rule.direction == "rise":
            holds = current >= rule.factor * baseline and current - baseline >= rule.difference_min
        else:
            holds = current <= rule.factor * baseline and baseline - current >= rule.difference_min
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


#: The longest step of a burn-rate rule's step grid: a window's edges off the grid are read as
#: windows of their own, at most this long.
GRID_STEP_MAX_SECONDS = 300


def grid_step(step: float) -> float:
    """The step of a burn-rate rule's grid: the longest divisor of the windows' common
    ``step`` (whole seconds) no longer than :data:`GRID_STEP_MAX_SECONDS` (a ticket rule's
    windows of 2 h, 6 h, 1 d and 3 d share 2 h: its grid is 5 minutes)."""
    whole = int(step)
    return float(next(d for d in range(min(whole, GRID_STEP_MAX_SECONDS), 0, -1) if whole % d == 0))


def _grid_windows(series, window, add, lengths: tuple[float, ...], now: float, step: float) -> dict:  # type: ignore[no-untyped-def]
    """Each window ``(now - length, now]``'s ``add`` of its parts (None: none holds data): its
    whole steps on the step grid (multiples of ``step`` since the epoch), the last steps of one
    ``series(start, end)`` read over the longest window, and, with ``now`` off the grid, the
    part before its first whole step and the part after the last, each a ``window(start,
    end)`` read. On the grid the next cycle's read shares every step but the newest, and a
    reader that keeps final steps (``alerts.kept_steps``) asks only for that one."""
    last = math.floor(now / step + 1e-9) * step
    if now - last < 1e-6:
        return _suffix_sums([v for _, v in series(now - max(lengths), now)], lengths, step, add)
    steps = [v for _, v in series(last - max(lengths) + step, last)]
    after = window(last, now)
    out = {}
    for length in lengths:
        whole = round(length / step) - 1
        before = window(now - length, last - length + step)
        parts = [before, *steps[len(steps) - whole :], after]
        chosen = [p for p in parts if p is not None]
        out[length] = add(chosen) if chosen else None
    return out


def _stepped_error_ratios(
    rule: BurnRateRule, reader: MetricsReader, selector: dict[str, str], now: float, step: float
) -> dict[float, float]:
    """Every window's error ratio from one step-series read over the longest window, on the
    step grid (:func:`_grid_windows`): exact windows add up, so the store reads each roll-up
    minute once instead of once per window, and once across cycles where the reader keeps
    final steps."""
    sli, lengths = rule.sli, rule.window_lengths_seconds()
    step = grid_step(step)
    if isinstance(sli, LatencySLI):
        family = sli.family
        merged = _grid_windows(
            lambda a, b: reader.histogram_series(family, selector, a, b, step),
            lambda a, b: reader.histogram_window(family, selector, a, b),
            merge_histograms,
            lengths,
            now,
            step,
        )
        return {
            length: math.nan if h is None else sli.error_ratio(h)[0] for length, h in merged.items()
        }
    assert isinstance(sli, ErrorSLI)
    values = sorted(
        {dict(i.labels).get(sli.label, "") for i in reader.series(sli.family, selector)}
    )
    increases: dict[float, dict[str, float]] = {length: {} for length in lengths}
    for value in (v for v in values if v):
        labels = {**selector, sli.label: value}
        totals = _grid_windows(
            lambda a, b, labels=labels: reader.counter_series(sli.family, labels, a, b, step),
            lambda a, b, labels=labels: reader.counter_window(sli.family, labels, a, b),
            sum,
            lengths,
            now,
            step,
        )
        for length, total in totals.items():
            if total is not None:
                increases[length][value] = total
    return {length: sli.error_ratio(by_value) for length, by_value in increases.items()}


def recorded_error_ratios(
    rule: BurnRateRule, reader: MetricsReader, now: float
) -> dict[float, float] | None:
    """Every window's error ratio as the server recorded it, where it evaluates the SLI
    recording rules ``tailwatch rules export`` wrote (:func:`recorded_sli_ratios`)."""
    return recorded_sli_ratios(rule.slo, rule.sli, rule.window_lengths_seconds(), reader, now)


def recorded_sli_ratios(
    slo: str,
    sli: SLI,
    lengths: Iterable[float],
    reader: MetricsReader,
    now: float,
    lookback_seconds: float = LOOKBACK_SECONDS,
) -> dict[float, float] | None:
    """SLO ``slo``'s error ratio over each window length as the server recorded it, where it
    evaluates the SLI recording rules ``tailwatch rules export`` wrote
    (``alerts.rules.records``): each record's latest sample within the lookback before
    ``now`` (``lookback_seconds``: the console's, whose range ends up to a step after its
    newest data), of this SLO and, for a latency SLO, of its threshold now. ``None`` when any
    window has no such sample: the windows are then computed from the engines' own series.
    The burn-rate rules and the console's SLO figures read them alike."""
    labels = slo_record_labels(slo, sli)
    out = {}
    for length in lengths:
        family = c.RAW_PREFIX + slo_record_name(slo, length)
        readings = reader.samples(family, labels, now - lookback_seconds, now)
        latest = max(
            (s for samples in readings.values() for s in samples),
            key=lambda s: s.timestamp_seconds,
            default=None,
        )
        if latest is None:
            return None
        out[length] = latest.value
    return out


def burn_rate(rule: BurnRateRule, reader: MetricsReader, now: float) -> list[Instance]:
    """One instance for the SLO; its value is the highest burn rate of a row, taken as the
    lower of the row's long and short burn rates (what must exceed the row's factor). The
    windows' error ratios are the server's recording rules where it has them (a window of
    days over every bucket series of a large fleet is the heaviest read a cycle has), else
    read from the engines' series."""
    selector = _slo_selector(rule)
    step = common_step(rule.window_lengths_seconds())
    recorded = recorded_error_ratios(rule, reader, now)
    if recorded is not None:
        ratios = recorded
    elif step is not None:
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
