"""Percentile bootstrap intervals of a difference between two runs' statistics.

A run is one or more repeats, each a sample of per-request figures (TTFT ms, say). The
statistic is the mean or a quantile of the pooled sample. One resample picks as many repeats
as the run has, with replacement, then as many requests as the run holds from the picked
repeats' requests, with replacement (a two-level bootstrap): with two or more repeats
a side the interval carries the run-to-run spread as well as the within-run sampling noise;
with one repeat it carries sampling noise only, which the result says (``has_repeats``).

The difference is ``b - a``; the interval is the percentile interval of the resampled
differences at ``confidence``. Seeded (same inputs, same interval) and bounded: at most
:data:`MAX_RESAMPLES` resamples of at most :data:`MAX_SAMPLES` values a side.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from slo.errors import SLOError

MAX_RESAMPLES = 10_000
#: Values per side past this are thinned evenly (a writer keeps at most a few thousand).
MAX_SAMPLES = 20_000
DEFAULT_RESAMPLES = 1_000
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class Statistic:
    """The mean (``quantile`` ``None``) or a quantile in [0, 1] (``numpy.quantile``'s
    linear interpolation, as ``loadgen.summary`` computes its percentiles)."""

    quantile: float | None = None

    def __post_init__(self) -> None:
        q = self.quantile
        if q is not None and not (isinstance(q, int | float) and 0.0 <= q <= 1.0):
            raise SLOError(f"quantile={q!r}: must be a number in [0, 1] (0.95 for p95)")

    @property
    def name(self) -> str:
        return "mean" if self.quantile is None else f"p{self.quantile * 100:g}"

    def of(self, values: np.ndarray) -> float:
        if self.quantile is None:
            return float(np.mean(values))
        return float(np.quantile(values, self.quantile))


@dataclass(frozen=True)
class DifferenceInterval:
    """``estimate`` = statistic(b) - statistic(a) on the pooled samples; ``[low, high]`` its
    percentile bootstrap interval. ``has_repeats``: both sides had two or more repeats, so
    the interval includes run-to-run noise."""

    statistic: str
    value_a: float
    value_b: float
    estimate: float
    low: float
    high: float
    confidence: float
    num_resamples: int
    num_repeats_a: int
    num_repeats_b: int

    @property
    def has_repeats(self) -> bool:
        return self.num_repeats_a >= 2 and self.num_repeats_b >= 2

    @property
    def excludes_zero(self) -> bool:
        """The difference is larger than the noise the interval measures."""
        return self.low > 0.0 or self.high < 0.0

    @property
    def relative(self) -> float:
        """``estimate / value_a`` (NaN when ``value_a`` is 0)."""
        return self.estimate / self.value_a if self.value_a else math.nan


def _groups(
    name: str, groups: Sequence[Sequence[float]], max_values: int = MAX_SAMPLES
) -> list[np.ndarray]:
    if isinstance(groups, str | bytes) or not len(groups):
        raise SLOError(f"{name}: expected one or more repeats (lists of values), got none")
    out = []
    for i, group in enumerate(groups):
        try:
            array = np.asarray(group, dtype=float).ravel()
        except (TypeError, ValueError):
            raise SLOError(f"{name}[{i}]: expected a list of numbers") from None
        if not np.all(np.isfinite(array)):
            raise SLOError(f"{name}[{i}]: holds a NaN or infinite value")
        if array.size:
            out.append(array)
    if not out:
        raise SLOError(f"{name}: every repeat is empty; a run needs at least one value")
    total = sum(a.size for a in out)
    if total > max_values:
        # NOTE: thinned evenly per repeat so each keeps its share (a bound, not a sample).
        out = [a[:: math.ceil(total / max_values)] for a in out]
    return out


#: Values drawn per chunk of resamples (memory bound: about 8 bytes × k groups each).
_CHUNK_VALUES = 2_000_000


def _resample_many(
    rng: np.random.Generator, groups: list[np.ndarray], stats: Sequence[Statistic], num: int
) -> np.ndarray:
    """``(len(stats), num)`` resampled statistics, vectorised, every statistic read off the
    same draws: per resample, ``k`` repeats picked with replacement, then ``n`` (the run's
    size) values drawn uniformly from the picked repeats' values."""
    values = np.concatenate(groups)
    sizes = np.array([g.size for g in groups])
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    k, n = len(groups), values.size
    quantiles = [s.quantile for s in stats if s.quantile is not None]
    out = np.empty((len(stats), num))
    rows = max(1, _CHUNK_VALUES // (n * k))
    for first in range(0, num, rows):
        r = min(rows, num - first)
        picks = rng.integers(0, k, size=(r, k))
        picked = sizes[picks]
        ends = np.cumsum(picked, axis=1)
        u = rng.random((r, n)) * ends[:, -1:]
        # NOTE: the slot each draw falls in: how many picked repeats end at or before it
        slot = (u[..., None] >= ends[:, None, :]).sum(axis=-1) if k > 1 else np.zeros_like(u, int)
        rows_ix = np.arange(r)[:, None]
        starts = (ends - picked)[rows_ix, slot]
        within = np.minimum((u - starts).astype(int), picked[rows_ix, slot] - 1)
        drawn = values[offsets[picks[rows_ix, slot]] + within]
        # NOTE: one sort per chunk serves every quantile asked for
        by_q = iter(np.quantile(drawn, quantiles, axis=1)) if quantiles else iter(())
        for i, stat in enumerate(stats):
            chosen = drawn.mean(axis=1) if stat.quantile is None else next(by_q)
            out[i, first : first + r] = chosen
    return out


def _check(num_resamples: int, confidence: float) -> None:
    if isinstance(num_resamples, bool) or not isinstance(num_resamples, int):
        raise SLOError(f"num_resamples={num_resamples!r}: must be a whole number")
    if not 10 <= num_resamples <= MAX_RESAMPLES:
        raise SLOError(f"num_resamples={num_resamples}: must be between 10 and {MAX_RESAMPLES}")
    if not (isinstance(confidence, int | float) and 0.0 < confidence < 1.0):
        raise SLOError(f"confidence={confidence!r}: must be in (0, 1), e.g. 0.95")


def bootstrap_differences(
    a: Sequence[Sequence[float]],
    b: Sequence[Sequence[float]],
    statistics: Sequence[Statistic],
    *,
    num_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
    max_values: int = MAX_SAMPLES,
) -> tuple[DifferenceInterval, ...]:
    """:func:`bootstrap_difference` of several statistics of the same two samples, read off
    the same resamples (one set of draws a side, not one per statistic). A side of more than
    ``max_values`` values (at most :data:`MAX_SAMPLES`) is thinned evenly to about that
    many, estimate included: a wider interval, never a narrower one."""
    _check(num_resamples, confidence)
    if isinstance(max_values, bool) or not isinstance(max_values, int):
        raise SLOError(f"max_values={max_values!r}: must be a whole number")
    if not 10 <= max_values <= MAX_SAMPLES:
        raise SLOError(f"max_values={max_values}: must be between 10 and {MAX_SAMPLES}")
    if not statistics:
        raise SLOError("statistics: expected at least one (Statistic() is the mean)")
    groups_a, groups_b = _groups("a", a, max_values), _groups("b", b, max_values)
    pooled_a, pooled_b = np.concatenate(groups_a), np.concatenate(groups_b)
    rng = np.random.default_rng(seed)
    diffs = _resample_many(rng, groups_b, statistics, num_resamples) - _resample_many(
        rng, groups_a, statistics, num_resamples
    )
    tail = (1.0 - confidence) / 2.0
    out = []
    for stat, row in zip(statistics, diffs, strict=True):
        low, high = np.quantile(row, [tail, 1.0 - tail])
        value_a, value_b = stat.of(pooled_a), stat.of(pooled_b)
        out.append(
            DifferenceInterval(
                statistic=stat.name,
                value_a=value_a,
                value_b=value_b,
                estimate=value_b - value_a,
                low=float(low),
                high=float(high),
                confidence=float(confidence),
                num_resamples=num_resamples,
                num_repeats_a=len(groups_a),
                num_repeats_b=len(groups_b),
            )
        )
    return tuple(out)


def bootstrap_difference(
    a: Sequence[Sequence[float]],
    b: Sequence[Sequence[float]],
    statistic: Statistic = Statistic(),
    *,
    num_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> DifferenceInterval:
    """The interval of ``statistic(b) - statistic(a)``; ``a`` and ``b`` are each a list of
    repeats, each a list of values (one repeat: ``[values]``). Empty repeats are ignored;
    a side with no value, a NaN, ``num_resamples`` outside [10, MAX_RESAMPLES] or
    ``confidence`` outside (0, 1) is an ``SLOError`` naming it."""
    (interval,) = bootstrap_differences(
        a, b, (statistic,), num_resamples=num_resamples, confidence=confidence, seed=seed
    )
    return interval
