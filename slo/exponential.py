"""OpenTelemetry exponential histograms: bucketing, downscaling, merging across scales, and
quantiles with their relative error bound.

At scale ``s`` the base is ``2 ** (2 ** -s)``; positive bucket ``i`` holds values in
``(base**i, base**(i + 1)]`` (upper bound inclusive, as the OpenTelemetry data model says), and
negative bucket ``i`` the mirror image. Lowering the scale by ``k`` merges ``2**k`` neighbouring
buckets: index ``i`` becomes ``i >> k``. Every value of a bucket ``(L, U]`` is within a relative
``(base - 1) / (base + 1)`` of ``2LU / (L + U)``, which is therefore the estimate returned.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from slo.errors import SLOError

MIN_SCALE = -10
MAX_SCALE = 20


def bucket_lower_boundary(index: int, scale: int) -> float:
    """``base ** index``, the exclusive lower boundary of bucket ``index`` (``inf`` on overflow)."""
    try:
        if scale <= 0:
            return math.ldexp(1.0, index << -scale)
        return math.exp2(index / (1 << scale))
    except OverflowError:
        return math.inf


def bucket_index(magnitude: float, scale: int) -> int:
    """Index of the bucket holding ``magnitude`` (> 0, finite) at ``scale``.

    Exact for powers of two (they are upper boundaries); otherwise a logarithm, corrected so
    that ``bucket_lower_boundary(i) < magnitude <= bucket_lower_boundary(i + 1)`` holds for the
    boundaries this module reports.
    """
    mantissa, exponent = math.frexp(magnitude)  # magnitude = mantissa * 2**exponent
    if mantissa == 0.5:  # an exact power of two, 2**(exponent - 1)
        return ((exponent - 1) << scale) - 1 if scale > 0 else (exponent - 2) >> -scale
    if scale <= 0:
        return (exponent - 1) >> -scale
    index = math.ceil(math.log2(magnitude) * (1 << scale)) - 1
    if magnitude <= bucket_lower_boundary(index, scale):
        index -= 1
    elif magnitude > bucket_lower_boundary(index + 1, scale):
        index += 1
    return index


class ExponentialQuantile(NamedTuple):
    """A quantile estimate from an exponential histogram.

    The exact quantile lies in ``[lower_bound, upper_bound]`` and within a relative
    ``relative_error_bound`` of ``value``. In the zero bucket the value is 0 and the bound is
    0 when the zero threshold is 0 (the observations were exact zeros), else ``inf``: only the
    absolute bound ``zero_threshold`` holds there.
    """

    value: float
    lower_bound: float
    upper_bound: float
    relative_error_bound: float
    in_zero_bucket: bool


@dataclass(frozen=True)
class ExponentialHistogram:
    """An OpenTelemetry exponential histogram data point (counts per bucket, not cumulative).

    ``positive_counts[k]`` is the count of bucket ``positive_offset + k``; likewise for the
    negative side. ``zero_count`` counts observations with ``|v| <= zero_threshold``.
    """

    scale: int
    positive_offset: int = 0
    positive_counts: tuple[float, ...] = ()
    negative_offset: int = 0
    negative_counts: tuple[float, ...] = ()
    zero_count: float = 0.0
    zero_threshold: float = 0.0

    def __post_init__(self) -> None:
        if not MIN_SCALE <= self.scale <= MAX_SCALE:
            raise SLOError(
                f"scale {self.scale} is outside OpenTelemetry's [{MIN_SCALE}, {MAX_SCALE}]"
            )
        if not (math.isfinite(self.zero_threshold) and self.zero_threshold >= 0):
            raise SLOError(f"zero_threshold must be finite and >= 0, got {self.zero_threshold}")
        for count in (*self.positive_counts, *self.negative_counts, self.zero_count):
            if not (math.isfinite(count) and count >= 0):
                raise SLOError(f"bucket counts must be finite and >= 0, got {count}")

    @property
    def base(self) -> float:
        """Ratio between consecutive bucket boundaries, ``2 ** (2 ** -scale)`` (``inf`` at -10)."""
        try:
            return math.exp2(2.0**-self.scale)
        except OverflowError:
            return math.inf

    @property
    def relative_error_bound(self) -> float:
        """Worst relative error of a quantile outside the zero bucket: ``(base-1)/(base+1)``."""
        base = self.base
        return 1.0 if math.isinf(base) else (base - 1) / (base + 1)

    @property
    def total_count(self) -> float:
        return sum(self.positive_counts) + sum(self.negative_counts) + self.zero_count

    @classmethod
    def from_observations(
        cls, observations: Iterable[float], scale: int, zero_threshold: float = 0.0
    ) -> ExponentialHistogram:
        """Record raw observations at ``scale``; ``|v| <= zero_threshold`` goes to the zero
        bucket. NaN and infinite observations are refused, as OpenTelemetry SDKs drop them."""
        positive: dict[int, float] = {}
        negative: dict[int, float] = {}
        zero_count = 0.0
        for value in observations:
            if not math.isfinite(value):
                raise SLOError(f"observation {value} is not finite; drop it before recording")
            if abs(value) <= zero_threshold:
                zero_count += 1
                continue
            side = positive if value > 0 else negative
            index = bucket_index(abs(value), scale)
            side[index] = side.get(index, 0.0) + 1
        p_offset, p_counts = _dense(positive)
        n_offset, n_counts = _dense(negative)
        return cls(scale, p_offset, p_counts, n_offset, n_counts, zero_count, zero_threshold)

    def downscaled(self, by: int) -> ExponentialHistogram:
        """The same observations at ``scale - by`` (``by >= 0``): buckets ``i`` map to ``i >> by``."""
        if by < 0:
            raise SLOError(f"cannot downscale by {by}; a histogram can only lose resolution")
        p_offset, p_counts = _dense(_sparse(self.positive_offset, self.positive_counts, by))
        n_offset, n_counts = _dense(_sparse(self.negative_offset, self.negative_counts, by))
        return ExponentialHistogram(
            self.scale - by,
            p_offset,
            p_counts,
            n_offset,
            n_counts,
            self.zero_count,
            self.zero_threshold,
        )


def merge_exponential_histograms(
    histograms: Iterable[ExponentialHistogram], *, max_num_buckets: int | None = None
) -> ExponentialHistogram:
    """Add exponential histograms recorded at any scales.

    Every input is downscaled to the lowest scale among them, and further (one step at a time)
    while either side spans more than ``max_num_buckets`` buckets (OpenTelemetry SDKs default
    to 160). The merged zero threshold is the largest one; buckets lying entirely within it
    move into the zero bucket. Merging is associative and commutative.
    """
    items = list(histograms)
    if not items:
        raise SLOError("no exponential histograms to merge; pass at least one")
    if max_num_buckets is not None and max_num_buckets < 1:
        raise SLOError(f"max_num_buckets must be >= 1, got {max_num_buckets}")
    scale = min(h.scale for h in items)
    zero_threshold = max(h.zero_threshold for h in items)
    positive: dict[int, float] = {}
    negative: dict[int, float] = {}
    zero_count = 0.0
    for h in items:
        zero_count += h.zero_count
        for target, offset, counts in (
            (positive, h.positive_offset, h.positive_counts),
            (negative, h.negative_offset, h.negative_counts),
        ):
            for index, count in _sparse(offset, counts, h.scale - scale).items():
                target[index] = target.get(index, 0.0) + count
    while max_num_buckets is not None and max(_span(positive), _span(negative)) > max_num_buckets:
        positive, negative, scale = _rescaled(positive, 1), _rescaled(negative, 1), scale - 1
        if scale < MIN_SCALE:
            raise SLOError(f"cannot fit the merged histogram into {max_num_buckets} buckets")
    for side in (positive, negative):
        for index in [i for i in side if bucket_lower_boundary(i + 1, scale) <= zero_threshold]:
            zero_count += side.pop(index)
    p_offset, p_counts = _dense(positive)
    n_offset, n_counts = _dense(negative)
    return ExponentialHistogram(
        scale, p_offset, p_counts, n_offset, n_counts, zero_count, zero_threshold
    )


def exponential_quantile(histogram: ExponentialHistogram, q: float) -> ExponentialQuantile:
    """The ``q``-quantile with its error bound.

    Edge rules as ``histogram_quantile``: ``q`` NaN → NaN, ``q < 0`` → -Inf, ``q > 1`` → +Inf,
    no observations → NaN (bounds NaN in all four cases). The bucket chosen is the first, in
    ascending value order, whose cumulative count reaches ``q * total`` and is non-zero, so the
    exact quantile (smallest observation with at least ``q * total`` at or below it) is in it.
    """
    nan = math.nan
    if math.isnan(q):
        return ExponentialQuantile(nan, nan, nan, nan, False)
    if q < 0 or q > 1:
        return ExponentialQuantile(math.copysign(math.inf, q), nan, nan, nan, False)
    total = histogram.total_count
    if total == 0:
        return ExponentialQuantile(nan, nan, nan, nan, False)
    rank = q * total
    cumulative = 0.0
    chosen: tuple[int, int] | None = None  # (side, index); side -1, 0 (zero bucket) or +1
    for side, index, count in _ascending(histogram):
        cumulative += count
        if count > 0:
            chosen = (side, index)
            if cumulative >= rank:
                break
    assert chosen is not None  # total > 0, so some bucket is non-empty
    side, index = chosen
    if side == 0:
        threshold = histogram.zero_threshold
        return ExponentialQuantile(0.0, -threshold, threshold, math.inf if threshold else 0.0, True)
    low = bucket_lower_boundary(index, histogram.scale)
    high = bucket_lower_boundary(index + 1, histogram.scale)
    estimate = 2 * low * high / (low + high) if math.isfinite(high) else low
    bound = histogram.relative_error_bound if math.isfinite(high) else math.inf
    if side > 0:
        return ExponentialQuantile(estimate, low, high, bound, False)
    return ExponentialQuantile(-estimate, -high, -low, bound, False)


def _ascending(h: ExponentialHistogram) -> Iterable[tuple[int, int, float]]:
    for k in range(len(h.negative_counts) - 1, -1, -1):
        yield -1, h.negative_offset + k, h.negative_counts[k]
    yield 0, 0, h.zero_count
    for k, count in enumerate(h.positive_counts):
        yield 1, h.positive_offset + k, count


def _sparse(offset: int, counts: Sequence[float], downscale_by: int) -> dict[int, float]:
    return _rescaled({offset + k: c for k, c in enumerate(counts) if c}, downscale_by)


def _rescaled(sparse: dict[int, float], downscale_by: int) -> dict[int, float]:
    """Bucket ``i`` becomes ``i >> downscale_by``; counts of merged buckets add up."""
    rescaled: dict[int, float] = {}
    for index, count in sparse.items():
        rescaled[index >> downscale_by] = rescaled.get(index >> downscale_by, 0.0) + count
    return rescaled


def _dense(sparse: dict[int, float]) -> tuple[int, tuple[float, ...]]:
    if not sparse:
        return 0, ()
    low, high = min(sparse), max(sparse)
    return low, tuple(sparse.get(i, 0.0) for i in range(low, high + 1))


def _span(sparse: dict[int, float]) -> int:
    return max(sparse) - min(sparse) + 1 if sparse else 0
