"""``ClassicHistogram``: one validated classic histogram (a fixed ``le`` layout with cumulative
counts), the plain-data form windows, merges and goodput work on."""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from slo.buckets import SMALL_DELTA_TOLERANCE, Bucket, coalesce_buckets
from slo.errors import SLOError
from slo.quantile import QuantileResult, histogram_quantile


@dataclass(frozen=True)
class ClassicHistogram:
    """Cumulative bucket counts over a fixed layout.

    ``upper_bounds`` is strictly increasing and ends with ``+Inf``; ``cumulative_counts[i]`` is
    the number (or rate) of observations ``<= upper_bounds[i]``, so the last entry is the total.
    Counts are finite and non-negative; they may be non-monotonic (scrape races, differences of
    snapshots) and are repaired only when a quantile is taken, as Prometheus does.
    ``sum_value`` is the sum of observations (the ``_sum`` series) when known.
    """

    upper_bounds: tuple[float, ...]
    cumulative_counts: tuple[float, ...]
    sum_value: float | None = None

    def __post_init__(self) -> None:
        bounds, counts = self.upper_bounds, self.cumulative_counts
        if len(bounds) != len(counts):
            raise SLOError(
                f"{len(bounds)} upper bounds but {len(counts)} counts; give one cumulative "
                "count per bound, +Inf included"
            )
        if not bounds or bounds[-1] != math.inf:
            raise SLOError(
                f"the highest upper bound must be +Inf, got {bounds[-1] if bounds else 'none'}; "
                "add the +Inf bucket (it holds the total count)"
            )
        for lower, upper in itertools.pairwise(bounds):
            if not lower < upper:
                raise SLOError(
                    f"upper bounds must be strictly increasing, got {lower} then {upper}; "
                    "use ClassicHistogram.from_buckets to sort and coalesce raw buckets"
                )
        for bound, count in zip(bounds, counts, strict=True):
            if not (math.isfinite(count) and count >= 0):
                raise SLOError(
                    f"bucket le={bound} has count {count}; counts must be finite and >= 0"
                )

    @classmethod
    def from_buckets(
        cls, buckets: Iterable[Bucket | tuple[float, float]], sum_value: float | None = None
    ) -> ClassicHistogram:
        """Build from raw ``(upper_bound, cumulative_count)`` pairs in any order; equal bounds
        (``0.2`` and ``2e-1``) are added together as Prometheus does."""
        ordered = coalesce_buckets(Bucket(*b) for b in buckets)
        return cls(
            tuple(b.upper_bound for b in ordered), tuple(b.count for b in ordered), sum_value
        )

    @classmethod
    def from_observations(
        cls, observations: Iterable[float], upper_bounds: Sequence[float]
    ) -> ClassicHistogram:
        """Bucket raw observations (each goes to the first bound ``>=`` it, as ``le`` means);
        ``+Inf`` is appended to ``upper_bounds`` when missing. NaN observations are refused."""
        bounds = tuple(upper_bounds)
        if not bounds or bounds[-1] != math.inf:
            bounds = (*bounds, math.inf)
        per_bucket = [0] * len(bounds)
        total_sum = 0.0
        for value in observations:
            if math.isnan(value):
                raise SLOError("observation is NaN; drop it before bucketing")
            per_bucket[bisect.bisect_left(bounds, value)] += 1
            total_sum += value
        cumulative, running = [], 0
        for count in per_bucket:
            running += count
            cumulative.append(float(running))
        return cls(bounds, tuple(cumulative), total_sum)

    @property
    def total_count(self) -> float:
        """Number of observations (the ``+Inf`` bucket's count)."""
        return self.cumulative_counts[-1]

    def buckets(self) -> tuple[Bucket, ...]:
        """The buckets as ``(upper_bound, cumulative_count)`` pairs."""
        return tuple(
            Bucket(b, c) for b, c in zip(self.upper_bounds, self.cumulative_counts, strict=True)
        )

    def quantile(
        self, q: float, *, small_delta_tolerance: float = SMALL_DELTA_TOLERANCE
    ) -> QuantileResult:
        """:func:`slo.quantile.histogram_quantile` of this histogram (observations >= 0)."""
        return histogram_quantile(q, self.buckets(), small_delta_tolerance=small_delta_tolerance)

    def scaled(self, factor: float) -> ClassicHistogram:
        """Every count (and the sum) multiplied by ``factor`` >= 0: an increase divided by
        the window in seconds is a rate; a sum divided by the number of series is an average."""
        if not (math.isfinite(factor) and factor >= 0):
            raise SLOError(f"scale factor must be finite and >= 0, got {factor}")
        total_sum = None if self.sum_value is None else self.sum_value * factor
        return ClassicHistogram(
            self.upper_bounds, tuple(c * factor for c in self.cumulative_counts), total_sum
        )


def histograms_from_rows(
    upper_bounds: tuple[float, ...],
    rows: Sequence[Sequence[float]],
    sums: Sequence[float | None],
) -> list[ClassicHistogram]:
    """``ClassicHistogram(upper_bounds, tuple(row), sum)`` for each row and sum, the checks of
    ``__post_init__`` made once for the layout and as one array test for all the counts: a
    day of 1-minute steps would otherwise check every bucket of every step in Python. Rows
    that fail are built one by one, so the error is the one the constructor raises for the
    first of them."""
    if not rows:
        return []
    first = ClassicHistogram(upper_bounds, tuple(rows[0]), sums[0])  # checks the layout
    counts = np.asarray(rows, dtype=float)
    shaped = counts.ndim == 2 and counts.shape[1] == len(upper_bounds)
    if not (shaped and (np.isfinite(counts) & (counts >= 0)).all()):
        return [
            ClassicHistogram(upper_bounds, tuple(r), s) for r, s in zip(rows, sums, strict=True)
        ]
    out = [first]
    for row, total in zip(rows[1:], sums[1:], strict=True):
        # NOTE: what the frozen dataclass's __init__ does, minus the checks made above.
        histogram = object.__new__(ClassicHistogram)
        object.__setattr__(histogram, "upper_bounds", upper_bounds)
        object.__setattr__(histogram, "cumulative_counts", tuple(row))
        object.__setattr__(histogram, "sum_value", total)
        out.append(histogram)
    return out
