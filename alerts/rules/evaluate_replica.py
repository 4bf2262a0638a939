"""The per-replica rule kinds over a :class:`MetricsReader`: KV saturation, replica imbalance,
target down and GPU health (one instance per ``target``, or per ``target`` and ``gpu``)."""

from __future__ import annotations

import math
import statistics

from alerts.rules.baseline import baseline_increases_by_target, median
from alerts.rules.read import (
    LOOKBACK_SECONDS,
    REPLICA_LABELS,
    Instance,
    by_group,
    group_key,
    groups,
    latest_readings,
)
from alerts.rules.types import (
    IMBALANCE_FAMILIES,
    GPUHealthRule,
    KVSaturationRule,
    ReplicaImbalanceRule,
    TargetDownRule,
)
from collectors import canonical as c
from collectors.store.protocols import MetricsReader

#: Families whose series mark a target as an engine target (``target-down`` pages only for
#: those, as the export's ``count by (instance) (requests_running)`` does).
ENGINE_TARGET_FAMILIES = (c.REQUESTS_RUNNING, c.REQUESTS_WAITING)
_UNCORRECTED = "uncorrected"


def kv_saturation(rule: KVSaturationRule, reader: MetricsReader, now: float) -> list[Instance]:
    """Per replica: the window's peak KV usage and its preemptions, against the median of
    its preemption rate over the baseline (``alerts.rules.baseline``) when the rule is
    relative (a replica without that much history is compared with nothing: PromQL's
    ``unless`` keeps it). The value is the peak usage. Every replica is read at once
    (:func:`by_group`), not one replica a query."""
    start = now - rule.window_seconds
    grouped = groups(reader, c.KV_CACHE_USAGE, REPLICA_LABELS)
    if not grouped:
        return []
    # NOTE: the window's peak, not the last reading: a preemption frees blocks, so usage
    # dips below the bound between preemptions of a storm (max_over_time in PromQL)
    readings: dict[tuple[tuple[str, str], ...], list[float]] = {}
    for series_labels, samples in reader.samples(c.KV_CACHE_USAGE, None, start, now).items():
        key = group_key(dict(series_labels), REPLICA_LABELS)
        if key in grouped:
            readings.setdefault(key, []).extend(s.value for s in samples)
    preempted_by = by_group(
        grouped,
        lambda labels: reader.counter_windows_by_target(c.PREEMPTIONS_TOTAL, labels, start, now),
    )
    past_by = (
        by_group(
            grouped,
            lambda labels: baseline_increases_by_target(
                reader,
                c.PREEMPTIONS_TOTAL,
                labels,
                start,
                rule.window_seconds,
                rule.baseline_window_seconds,
            ),
        )
        if rule.rise_min is not None
        else {}
    )
    out = []
    for key in grouped:
        preempted = preempted_by.get(key)
        if not readings.get(key) or preempted is None:
            continue
        usage = max(readings[key])
        rate = preempted / rule.window_seconds
        holds = usage >= rule.usage_min and preempted >= max(rule.preemptions_min, 1e-9)
        if rule.rise_min is not None:
            base = median(past_by.get(key, []))
            # NOTE: no baseline (a new replica) compares with nothing: PromQL's ``unless``
            if not math.isnan(base):
                holds = holds and rate > rule.rise_min * base / rule.window_seconds
        if rule.preemptions_per_second_min is not None:
            holds = holds and rate > rule.preemptions_per_second_min
        out.append(Instance(dict(key), usage, holds))
    return out


def _replica_signal(
    rule: ReplicaImbalanceRule, reader: MetricsReader, now: float
) -> dict[tuple[tuple[str, str], ...], float]:
    start = now - rule.window_seconds
    values: dict[tuple[tuple[str, str], ...], float] = {}
    family = IMBALANCE_FAMILIES.get(rule.signal)
    means = getattr(reader, "histogram_means_by_target", None)
    if family is not None and rule.signal.endswith("_mean") and means is not None:
        # NOTE: a mean needs only each target's sum and count (a server sends two series a
        # target instead of every bucket); None: the reader cannot say in one read
        grouped = groups(reader, family, REPLICA_LABELS)
        unsaid: list[dict[str, str] | None] = []

        def sums(labels: dict[str, str] | None) -> dict[str, tuple[float, float]]:
            got = means(family, labels, start, now)
            if got is None:
                unsaid.append(labels)
            return got or {}

        read = by_group(grouped, sums)
        if not unsaid:
            for key, (total, count) in read.items():
                if count and count >= rule.min_observations and not math.isnan(total):
                    values[key] = total / count
            return values
    if family is not None:
        grouped = groups(reader, family, REPLICA_LABELS)
        windows = by_group(
            grouped,
            lambda labels: reader.histogram_windows_by_target(family, labels, start, now),
        )
        for key in grouped:
            window = windows.get(key)
            count = 0.0 if window is None else window.cumulative_counts[-1]
            if window is None or not count or count < rule.min_observations:
                continue
            if rule.signal.endswith("_mean"):
                if window.sum_value is not None:
                    values[key] = window.sum_value / count
            else:
                values[key] = window.quantile(0.5).value
        return values
    grouped = groups(reader, c.REQUESTS_WAITING, REPLICA_LABELS)
    means: dict[tuple[tuple[str, str], ...], list[float]] = {}
    for series_labels, samples in reader.samples(c.REQUESTS_WAITING, None, start, now).items():
        key = group_key(dict(series_labels), REPLICA_LABELS)
        if key in grouped and samples:
            means.setdefault(key, []).append(statistics.fmean(s.value for s in samples))
    for key in grouped:
        if means.get(key):
            values[key] = max(means[key])  # NOTE: max by (instance) (avg_over_time(...))
    return values


def replica_imbalance(
    rule: ReplicaImbalanceRule, reader: MetricsReader, now: float
) -> list[Instance]:
    """Each replica's signal against the median of its model's fleet (itself included, as
    PromQL's ``quantile by (model) (0.5, ...)``); none hold below ``replicas_min`` replicas.
    A replica without ``min_observations`` in the window is in neither (no evidence)."""
    by_model: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for key, value in _replica_signal(rule, reader, now).items():
        if not math.isnan(value):
            by_model.setdefault(dict(key).get(c.LABEL_MODEL, ""), {})[key] = value
    out = []
    for replicas in by_model.values():
        median = statistics.median(replicas.values())
        enough = len(replicas) >= rule.replicas_min
        for key, value in replicas.items():
            holds = enough and value > rule.ratio_min * median and value - median > rule.excess_min
            out.append(Instance(dict(key), value, holds))
    return out


def target_down(rule: TargetDownRule, reader: MetricsReader, now: float) -> list[Instance]:
    """``up == 0`` per engine target: its last scrape within the lookback failed. A target
    with no scrape in the lookback (no longer scraped) gives no instance."""
    targets = sorted(
        {
            target
            for family in ENGINE_TARGET_FAMILIES
            for info in reader.series(family)
            if (target := dict(info.labels).get(c.LABEL_TARGET))
        }
    )
    out = []
    recent_by = reader.scrapes_by_target(targets, now - LOOKBACK_SECONDS, now)
    for target in targets:
        recent = recent_by.get(target)
        if not recent:
            continue
        last = max(recent, key=lambda s: s.timestamp_seconds)
        out.append(Instance({c.LABEL_TARGET: target}, 1.0 if last.is_up else 0.0, not last.is_up))
    return out


def _gpu_key(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    names = (c.LABEL_TARGET, c.LABEL_GPU)
    return tuple((n, labels[n]) for n in names if labels.get(n))


def gpu_health(rule: GPUHealthRule, reader: MetricsReader, now: float) -> list[Instance]:
    """Per GPU: new uncorrected ECC errors over the window plus the throttle reasons of
    ``throttle_reasons`` active now; holds when that count is above 0. No NVML data, no
    instance."""
    found: dict[tuple[tuple[str, str], ...], float] = {}
    for info in reader.series(c.GPU_ECC_ERRORS_TOTAL, {c.LABEL_ERROR_TYPE: _UNCORRECTED}):
        labels = dict(info.labels)
        increase = reader.counter_window(
            c.GPU_ECC_ERRORS_TOTAL, labels, now - rule.window_seconds, now
        )
        key = _gpu_key(labels)
        found[key] = found.get(key, 0.0) + (increase or 0.0)
    for series_labels, value in latest_readings(reader, c.GPU_THROTTLE_ACTIVE, None, now).items():
        labels = dict(series_labels)
        key = _gpu_key(labels)
        active = labels.get(c.LABEL_REASON) in rule.throttle_reasons and value >= 1
        found[key] = found.get(key, 0.0) + (1.0 if active else 0.0)
    return [Instance(dict(key), value, value > 0) for key, value in sorted(found.items())]
