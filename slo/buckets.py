"""Classic (``le``-labelled) bucket samples: parsing ``le``, grouping series into histograms,
and the two repairs Prometheus applies before interpolating (coalescing equal bounds and forcing
monotonic counts).

Everything here follows Prometheus's ``promql/quantile.go`` and ``funcHistogramQuantile``
(see ``shared/reference/prometheus-slo.md`` §1).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from slo.errors import DuplicateLabelSetError

#: Prometheus's tolerance for "precision-only" non-monotonicity (v2.49 and later).
#: Pass ``0.0`` to reproduce v2.48 and earlier (2.42 included), where only exact equality counts.
SMALL_DELTA_TOLERANCE = 1e-12

BUCKET_LABEL = "le"
METRIC_NAME_LABEL = "__name__"

_MIN_NORMAL = 2.2250738585072014e-308
_MAX_FLOAT = 1.7976931348623157e308
# Go strconv.ParseFloat syntax, minus the forms Prometheus cannot use as a bound (NaN).
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_HEXADECIMAL = re.compile(r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+")
_INFINITY = re.compile(r"([+-]?)(?:inf|infinity)", re.IGNORECASE)


class Bucket(NamedTuple):
    """One classic bucket: observations ``<= upper_bound`` (cumulative ``count``)."""

    upper_bound: float
    count: float


class BucketGroup(NamedTuple):
    """The buckets of one histogram and its output labels (sorted, without ``le``/``__name__``)."""

    labels: tuple[tuple[str, str], ...]
    buckets: tuple[Bucket, ...]


class GroupedBuckets(NamedTuple):
    """Result of :func:`group_bucket_samples`: the histograms found and the ``le`` values that
    were skipped as missing or malformed (Prometheus warns about those and ignores the sample)."""

    groups: tuple[BucketGroup, ...]
    skipped_le_values: tuple[str, ...]


def parse_le(text: str) -> float | None:
    """Parse an ``le`` label value as Go's ``strconv.ParseFloat`` does, or return ``None``.

    Accepts ``0.1``, ``.2``, ``2e-1``, ``1e0``, hexadecimal ``0x1p-3`` and every case of
    ``Inf``/``+Inf``/``-inf``/``Infinity``. Returns ``None`` (the sample is skipped, as
    Prometheus does) for anything else, for a finite value that overflows to infinity
    (``1e400``: Go reports a range error), and for ``NaN``, which Go parses but which cannot
    order buckets (Prometheus's sort assumes it never happens).
    """
    infinity = _INFINITY.fullmatch(text)
    if infinity:
        return -math.inf if infinity.group(1) == "-" else math.inf
    if _DECIMAL.fullmatch(text):
        value = float(text)
    elif _HEXADECIMAL.fullmatch(text):
        value = float.fromhex(text)
    else:
        return None
    return None if math.isinf(value) else value


def group_bucket_samples(
    samples: Iterable[tuple[Mapping[str, str], float]],
) -> GroupedBuckets:
    """Group labelled bucket samples into histograms, as ``histogram_quantile`` does.

    Each sample is ``(labels, value)``; ``labels`` includes ``le`` and, for raw series, the
    metric name under ``__name__``. Samples are grouped by every label except ``le``; each
    group's output labels drop ``__name__`` too. Samples whose ``le`` is missing or malformed
    are skipped and reported in ``skipped_le_values`` (``""`` for a missing label).

    Raises :class:`DuplicateLabelSetError` when two groups (for example two metric names)
    end up with the same output labels; select one metric or aggregate them first.
    """
    by_identity: dict[tuple[tuple[str, str], ...], list[Bucket]] = {}
    skipped: list[str] = []
    for labels, value in samples:
        le_text = labels.get(BUCKET_LABEL, "")
        upper_bound = parse_le(le_text)
        if upper_bound is None:
            skipped.append(le_text)
            continue
        identity = tuple(sorted((k, v) for k, v in labels.items() if k != BUCKET_LABEL))
        by_identity.setdefault(identity, []).append(Bucket(upper_bound, value))

    groups: dict[tuple[tuple[str, str], ...], BucketGroup] = {}
    for identity, buckets in by_identity.items():
        output = tuple((k, v) for k, v in identity if k != METRIC_NAME_LABEL)
        if output in groups:
            shown = "{" + ", ".join(f'{k}="{v}"' for k, v in output) + "}"
            raise DuplicateLabelSetError(
                f"two histograms share the output labels {shown} once le and the metric name are "
                "dropped; select a single metric name or aggregate the series first"
            )
        groups[output] = BucketGroup(output, tuple(buckets))
    return GroupedBuckets(tuple(groups.values()), tuple(skipped))


def almost_equal(a: float, b: float, epsilon: float) -> bool:
    """Prometheus's ``almost.Equal``: relative difference to the *sum* of magnitudes below
    ``epsilon``; effectively exact when either value is zero. NaN equals NaN."""
    if (math.isnan(a) and math.isnan(b)) or a == b:
        return True
    abs_sum = abs(a) + abs(b)
    diff = abs(a - b)
    if a == 0 or b == 0 or abs_sum < _MIN_NORMAL:
        return diff < epsilon * _MIN_NORMAL
    return diff / min(abs_sum, _MAX_FLOAT) < epsilon


def coalesce_buckets(buckets: Iterable[Bucket]) -> list[Bucket]:
    """Sort by upper bound and add up the counts of equal bounds (``0.2``, ``2e-1``, ``2.0e-1``)."""
    merged: list[Bucket] = []
    for bucket in sorted(buckets, key=lambda b: b.upper_bound):
        if merged and merged[-1].upper_bound == bucket.upper_bound:
            merged[-1] = Bucket(bucket.upper_bound, merged[-1].count + bucket.count)
        else:
            merged.append(bucket)
    return merged


def ensure_monotonic(
    buckets: list[Bucket], small_delta_tolerance: float = SMALL_DELTA_TOLERANCE
) -> bool:
    """Make cumulative counts non-decreasing in place; return whether a real decrease was fixed.

    A decrease is raised to the running maximum (Prometheus's "envelope"). A difference within
    ``small_delta_tolerance`` (relative to the sum of both counts) is treated as float noise and
    flattened without being reported. ``0.0`` reproduces Prometheus 2.42 exactly.
    """
    forced = False
    previous = buckets[0].count if buckets else 0.0
    for i in range(1, len(buckets)):
        current = buckets[i].count
        if current == previous:
            continue
        if small_delta_tolerance > 0 and almost_equal(previous, current, small_delta_tolerance):
            buckets[i] = Bucket(buckets[i].upper_bound, previous)
            continue
        if current < previous:
            buckets[i] = Bucket(buckets[i].upper_bound, previous)
            forced = True
            continue
        previous = current
    return forced
