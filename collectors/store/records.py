"""Plain data the store takes and returns."""

from __future__ import annotations

from dataclasses import dataclass

from collectors.canonical import CanonicalHistogram, CanonicalSample, Labels, Normalised, RawSample


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
