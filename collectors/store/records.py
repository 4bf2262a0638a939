"""Plain data the store takes and returns."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from collectors.canonical import CanonicalHistogram, CanonicalSample, Labels, Normalised, RawSample
from slo import ClassicHistogram, QuantileResult
from slo.quantile_batch import histogram_quantiles


class SemanticsMismatchError(ValueError):
    """Selected series carry different semantic flags (e.g. a token-weighted ITL next to a
    per-step one); adding them would mix two different measurements."""


class DuplicateSeriesError(ValueError):
    """One scrape holds two readings of the same stored series (same family, labels and
    semantic flags); which one is right cannot be told, so nothing is written."""


@dataclass(frozen=True)
class ScrapeRecord:
    """One scrape of one target, ready to store. ``timestamp_seconds`` with ``target`` is the
    scrape's identity: a record written twice is stored once."""

    target: str
    timestamp_seconds: float
    samples: tuple[CanonicalSample, ...] = ()
    histograms: tuple[CanonicalHistogram, ...] = ()
    raw: tuple[RawSample, ...] = ()
    dialect: str = ""
    duration_seconds: float | None = None
    is_up: bool = True
    error: str = ""

    @classmethod
    def from_normalised(
        cls,
        target: str,
        timestamp_seconds: float,
        normalised: Normalised,
        duration_seconds: float | None = None,
    ) -> ScrapeRecord:
        """A record of a successful scrape: everything one
        :func:`collectors.dialects.normalise` call produced."""
        return cls(
            target=target,
            timestamp_seconds=timestamp_seconds,
            samples=normalised.samples,
            histograms=normalised.histograms,
            raw=normalised.raw,
            dialect=",".join(sorted(normalised.dialects)),
            duration_seconds=duration_seconds,
        )


@dataclass(frozen=True)
class SeriesInfo:
    """A stored series: its family, labels, kind and semantic flags."""

    family: str
    labels: Labels
    kind: str
    flags: frozenset[str]


class ScrapeStatus(NamedTuple):
    """One stored scrape of a target: when, whether it succeeded, and why not."""

    timestamp_seconds: float
    is_up: bool
    error: str


class StoredExemplar(NamedTuple):
    """An exemplar seen in a stored scrape: the bucket's upper bound, the observed value and
    the exemplar's labels (``trace_id`` among them when the engine traces)."""

    upper_bound: float
    value: float
    labels: Labels


class HistogramStep(NamedTuple):
    """The merged distribution observed over ``(t - step, t]`` (``None``: no data)."""

    t: float
    histogram: ClassicHistogram | None


class QuantileStep(NamedTuple):
    """The quantiles of one step, in the order asked for (``None``: no data)."""

    t: float
    quantiles: tuple[QuantileResult, ...] | None


def scalar_quantile_steps(
    steps: Iterable[HistogramStep], qs: Sequence[float], small_delta_tolerance: float
) -> list[QuantileStep]:
    """``ClassicHistogram.quantile`` of each of ``qs`` for each step (``None`` stays ``None``):
    the rule every ``MetricsReader.quantile_series`` follows, one step at a time."""
    return [
        QuantileStep(
            t,
            None
            if h is None
            else tuple(h.quantile(q, small_delta_tolerance=small_delta_tolerance) for q in qs),
        )
        for t, h in steps
    ]


def quantile_steps(
    steps: Iterable[HistogramStep], qs: Sequence[float], small_delta_tolerance: float
) -> list[QuantileStep]:
    """:func:`scalar_quantile_steps`, bit for bit, computed per layout over the matrix of the
    steps' counts (``slo.quantile_batch``): a day of 1-minute steps costs milliseconds."""
    steps = list(steps)
    by_layout: dict[tuple[float, ...], list[int]] = {}
    for i, (_, h) in enumerate(steps):
        if h is not None:
            by_layout.setdefault(h.upper_bounds, []).append(i)
    results: dict[int, tuple[QuantileResult, ...]] = {}
    for bounds, chosen in by_layout.items():
        counts = [steps[i][1].cumulative_counts for i in chosen]
        batch = histogram_quantiles(bounds, counts, qs, small_delta_tolerance)
        results.update(zip(chosen, batch, strict=True))
    return [QuantileStep(t, results.get(i)) for i, (t, _) in enumerate(steps)]


class CounterStep(NamedTuple):
    """A counter's increase over ``(t - step, t]`` summed across series (``None``: no data)."""

    t: float
    increase: float | None
