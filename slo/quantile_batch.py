"""``histogram_quantile`` of many histograms of one layout at once: numpy over the matrix of
their cumulative counts (one row per histogram) instead of a Python loop per bucket.

Bit-for-bit the same :class:`~slo.quantile.QuantileResult` as :func:`slo.histogram_quantile`
on each row: the same decisions and float operations in the same order (Prometheus's
monotonicity repair, bucket by bucket; rank ``q * total``; the first bucket whose count
reaches it; ``start + (end - start) * (rank / count)``). NOTE: a layout of one bucket and
counts past 2**53 (not all exact in float64) go to the scalar function instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from slo.buckets import Bucket
from slo.quantile import QuantileResult, histogram_quantile

_MIN_NORMAL = 2.2250738585072014e-308
_MAX_FLOAT = 1.7976931348623157e308
#: Counts past this are not all exact in float64; such rows take the scalar path.
_EXACT_INTEGERS = 2.0**53


def histogram_quantiles(
    upper_bounds: tuple[float, ...],
    counts: Sequence[Sequence[float]],
    qs: Sequence[float],
    small_delta_tolerance: float,
) -> list[tuple[QuantileResult, ...]]:
    """Per row of ``counts`` (cumulative, one per bound of ``upper_bounds``, a valid
    ``slo.ClassicHistogram`` layout: strictly increasing, ``+Inf`` last), the
    :func:`~slo.histogram_quantile` of each of ``qs`` (observations >= 0)."""
    if not len(counts):
        return []

    def scalar(i: int) -> tuple[QuantileResult, ...]:
        buckets = [Bucket(b, c) for b, c in zip(upper_bounds, counts[i], strict=True)]
        return tuple(
            histogram_quantile(q, buckets, small_delta_tolerance=small_delta_tolerance) for q in qs
        )

    matrix = np.asarray(counts, dtype=float)
    rows, width = matrix.shape
    if width < 2:
        return [scalar(i) for i in range(rows)]
    bounds = np.asarray(upper_bounds, dtype=float)
    repaired, forced = _ensure_monotonic(matrix, small_delta_tolerance)
    per_q = [_quantile_column(q, bounds, repaired, forced) for q in qs]
    out = [tuple(column[i] for column in per_q) for i in range(rows)]
    for i in np.flatnonzero(matrix.max(axis=1) >= _EXACT_INTEGERS).tolist():
        out[i] = scalar(i)
    return out


def _ensure_monotonic(matrix: np.ndarray, tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """``slo.buckets.ensure_monotonic`` on every row at once (a loop over the buckets, each
    step vectorised over the rows): the repaired counts and whether a real decrease was
    fixed. The same decisions as the scalar loop: a count equal to the running one is kept,
    one :func:`~slo.buckets.almost_equal` to it or below it is raised to it (only the latter
    reported), and any other becomes the running count."""
    repaired = matrix.copy()
    previous = repaired[:, 0].copy()
    forced = np.zeros(matrix.shape[0], dtype=bool)
    for i in range(1, matrix.shape[1]):
        current = repaired[:, i]
        equal = current == previous
        near = ~equal & _almost_equal(previous, current, tolerance)
        down = ~equal & ~near & (current < previous)
        held = near | down
        forced |= down
        repaired[:, i] = np.where(held, previous, current)
        previous = np.where(held | equal, previous, current)
    return repaired, forced


def _almost_equal(a: np.ndarray, b: np.ndarray, tolerance: float) -> np.ndarray:
    """``slo.buckets.almost_equal`` elementwise, with its own operations (so the same
    verdicts); never true for ``tolerance <= 0``, where the scalar loop skips it."""
    if tolerance <= 0:
        return np.zeros(a.shape, dtype=bool)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        abs_sum = np.abs(a) + np.abs(b)
        diff = np.abs(a - b)
        tiny = (a == 0) | (b == 0) | (abs_sum < _MIN_NORMAL)
        return (a == b) | np.where(
            tiny, diff < tolerance * _MIN_NORMAL, diff / np.minimum(abs_sum, _MAX_FLOAT) < tolerance
        )


def _quantile_column(
    q: float, bounds: np.ndarray, matrix: np.ndarray, forced: np.ndarray
) -> list[QuantileResult]:
    """``histogram_quantile(q, row)`` for every row of the repaired ``matrix`` (at least two
    buckets), ``forced`` saying which rows were repaired."""
    rows, width = matrix.shape
    nan = math.nan
    if math.isnan(q):
        return [QuantileResult(nan, nan, nan, False, False)] * rows
    if q < 0:
        return [QuantileResult(-math.inf, nan, nan, False, False)] * rows
    if q > 1:
        return [QuantileResult(math.inf, nan, nan, False, False)] * rows
    last = width - 1
    totals = matrix[:, last]
    rank = q * totals
    reached = matrix[:, :last] >= rank[:, None]
    b = np.where(reached.any(axis=1), reached.argmax(axis=1), last)
    holding = reached & (matrix[:, :last] > 0)
    held = np.where(holding.any(axis=1), holding.argmax(axis=1), last)
    # The interval of the held bucket (the lowest one starts at 0: observations >= 0).
    first = bounds[0]
    lowest_start = 0.0 if first > 0 else -math.inf
    lower = np.where(held > 0, bounds[np.maximum(held - 1, 0)], lowest_start)
    upper = bounds[held]
    # The value: Prometheus's interpolation, in its order of operations.
    rows_at = np.arange(rows)
    below = np.maximum(b - 1, 0)
    inner = b > 0
    start = np.where(inner, bounds[below], 0.0)
    end = bounds[np.minimum(b, last)]
    count = np.where(inner, matrix[rows_at, b] - matrix[rows_at, below], matrix[rows_at, b])
    local = np.where(inner, rank - matrix[rows_at, below], rank)
    with np.errstate(divide="ignore", invalid="ignore"):
        interpolated = start + (end - start) * (local / count)
    value = np.where(count != 0, interpolated, nan)
    if first <= 0:
        value = np.where(b == 0, first, value)
    value = np.where(b == last, bounds[last - 1], value)
    empty = totals == 0
    out = []
    for v, lo, hi, inf, zero, fixed in zip(
        value.tolist(),
        lower.tolist(),
        upper.tolist(),
        (held == last).tolist(),
        empty.tolist(),
        forced.tolist(),
        strict=True,
    ):
        out.append(
            QuantileResult(nan, nan, nan, False, fixed)
            if zero
            else QuantileResult(v, lo, hi, inf, fixed)
        )
    return out
