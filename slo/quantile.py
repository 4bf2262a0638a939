"""``histogram_quantile`` and ``histogram_fraction`` on classic buckets, Prometheus-exact, with
the bucket interval that bounds the true value.

The value follows ``BucketQuantile`` in Prometheus's ``promql/quantile.go`` rule for rule
(``shared/reference/prometheus-slo.md`` §1.2-1.4). What Prometheus does not return, and this
module does, is the interval of the bucket holding the rank: the true quantile of the
observations that produced the buckets always lies inside it, however far off the linear
interpolation is.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

from slo.buckets import SMALL_DELTA_TOLERANCE, Bucket, coalesce_buckets, ensure_monotonic

_NAN = math.nan


class QuantileResult(NamedTuple):
    """A quantile estimate and what is known about its error.

    ``value`` is what Prometheus returns. ``lower_bound``/``upper_bound`` are the bounds of the
    bucket holding the rank: the exact quantile (the smallest observation with at least
    ``q * count`` observations at or below it) lies in ``[lower_bound, upper_bound]``. They are
    NaN when there is no bucket to speak of (``q`` outside [0, 1] or NaN, no ``+Inf`` bucket,
    fewer than two buckets, no observations).

    ``in_inf_bucket`` is true when the rank falls in the ``+Inf`` bucket: the value is then
    capped at the highest finite bound and the true quantile is above it (``upper_bound`` is
    ``+Inf``). ``has_forced_monotonicity`` is true when decreasing cumulative counts had to be
    raised (Prometheus's info annotation "input to histogram_quantile needed to be fixed for
    monotonicity").
    """

    value: float
    lower_bound: float
    upper_bound: float
    in_inf_bucket: bool
    has_forced_monotonicity: bool


def histogram_quantile(
    q: float,
    buckets: Iterable[Bucket | tuple[float, float]],
    *,
    small_delta_tolerance: float = SMALL_DELTA_TOLERANCE,
    assume_non_negative: bool = True,
) -> QuantileResult:
    """The ``q``-quantile of classic buckets ``(upper_bound, cumulative_count)``, any order.

    Edge rules, in Prometheus's order: ``q`` NaN → NaN; ``q < 0`` → -Inf; ``q > 1`` → +Inf
    (before any bucket check); no buckets or highest bound not ``+Inf`` → NaN; equal bounds are
    coalesced by adding counts; decreasing counts are raised to the running maximum; fewer than
    two buckets → NaN; zero observations → NaN; rank in the ``+Inf`` bucket → the highest finite
    bound; rank in the lowest bucket with a bound ``<= 0`` → that bound; otherwise linear
    interpolation, from 0 in the lowest bucket. ``q = 0`` with an empty lowest bucket → NaN (0/0).

    ``small_delta_tolerance``: ``1e-12`` is Prometheus >= 2.49; ``0.0`` reproduces 2.42.
    ``assume_non_negative`` (observations are durations or sizes) makes the lowest bucket's
    interval start at 0 rather than -Inf; it never changes ``value``.
    """
    if math.isnan(q):
        return QuantileResult(_NAN, _NAN, _NAN, False, False)
    if q < 0:
        return QuantileResult(-math.inf, _NAN, _NAN, False, False)
    if q > 1:
        return QuantileResult(math.inf, _NAN, _NAN, False, False)
    ordered = coalesce_buckets(Bucket(*b) for b in buckets)
    if not ordered or ordered[-1].upper_bound != math.inf:
        return QuantileResult(_NAN, _NAN, _NAN, False, False)
    forced = ensure_monotonic(ordered, small_delta_tolerance)
    if len(ordered) < 2:
        return QuantileResult(_NAN, _NAN, _NAN, False, forced)
    observations = ordered[-1].count
    if observations == 0:
        return QuantileResult(_NAN, _NAN, _NAN, False, forced)

    rank = q * observations
    last = len(ordered) - 1
    b = next((i for i in range(last) if ordered[i].count >= rank), last)
    # NOTE: for rank 0 Prometheus picks the lowest bucket even when it is empty; the interval
    # instead names the first non-empty bucket, which is where the smallest observation is.
    held = next((i for i in range(last) if ordered[i].count >= rank and ordered[i].count > 0), last)
    lower_bound, upper_bound = _interval(ordered, held, assume_non_negative)
    in_inf_bucket = held == last

    if b == last:
        value = ordered[last - 1].upper_bound
    elif b == 0 and ordered[0].upper_bound <= 0:
        value = ordered[0].upper_bound
    else:
        start, end, count = 0.0, ordered[b].upper_bound, ordered[b].count
        if b > 0:
            start = ordered[b - 1].upper_bound
            count -= ordered[b - 1].count
            rank -= ordered[b - 1].count
        value = start + (end - start) * (rank / count) if count else _NAN
    return QuantileResult(value, lower_bound, upper_bound, in_inf_bucket, forced)


def _interval(ordered: list[Bucket], index: int, assume_non_negative: bool) -> tuple[float, float]:
    if index > 0:
        return ordered[index - 1].upper_bound, ordered[index].upper_bound
    first = ordered[0].upper_bound
    return (0.0 if assume_non_negative and first > 0 else -math.inf), first


def histogram_fraction(
    lower: float,
    upper: float,
    buckets: Iterable[Bucket | tuple[float, float]],
    *,
    small_delta_tolerance: float = SMALL_DELTA_TOLERANCE,
) -> float:
    """Estimated fraction of observations in ``(lower, upper]``, as Prometheus 3.x's
    ``histogram_fraction`` computes it on classic buckets.

    Linear interpolation inside a bucket; the lowest bucket starts at 0 when its bound is
    positive and at -Inf otherwise. A finite value inside a bucket of infinite width (the
    ``+Inf`` bucket, or a lowest bucket reaching -Inf) counts as sitting on the bucket's
    finite edge, so such a bucket contributes nothing to a finite range. Use ``lower = -inf``
    for "at or below ``upper``". NaN when there is no ``+Inf`` bucket, no observation, or a
    NaN bound; 0 when ``lower >= upper``. A bound equal to a bucket bound is exact.
    """
    ordered = coalesce_buckets(Bucket(*b) for b in buckets)
    if not ordered or ordered[-1].upper_bound != math.inf:
        return _NAN
    ensure_monotonic(ordered, small_delta_tolerance)
    total = ordered[-1].count
    if total == 0 or math.isnan(lower) or math.isnan(upper):
        return _NAN
    if lower >= upper:
        return 0.0
    lower_rank = _rank_at(lower, ordered)
    upper_rank = _rank_at(upper, ordered)
    return (min(upper_rank, total) - min(lower_rank, total)) / total


def _rank_at(x: float, ordered: list[Bucket]) -> float:
    """Interpolated number of observations at or below ``x`` (Prometheus's scan, one bound)."""
    rank = 0.0
    for i, bucket in enumerate(ordered):
        if i == 0:
            start = 0.0 if bucket.upper_bound > 0 else -math.inf
        else:
            start = ordered[i - 1].upper_bound
        end = bucket.upper_bound
        if start >= x:
            return rank
        if start < x < end:
            in_bucket = bucket.count - rank
            if start == -math.inf:
                return rank + in_bucket
            if end == math.inf:
                return rank
            return rank + in_bucket * (x - start) / (end - start)
        rank = bucket.count
    return math.inf
