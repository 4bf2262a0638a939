"""The two SLIs a burn-rate rule reads, as data: which canonical family, which series are bad.

- :class:`LatencySLI`: "fraction of requests with TTFT (ITL, e2e) <= threshold", read from the
  merged histogram as ``1 - bucket{le=bound} / count``. A classic histogram only knows its
  bucket edges, so the threshold is snapped to one (:func:`snap_threshold`) and the bound it
  really measures is reported next to the one asked for.
- :class:`ErrorSLI`: the error ratio of ``slo.outcomes``: which ``finished_reason`` values or
  HTTP codes are bad and which are counted at all, as exact value sets and RE2 patterns that
  agree with :func:`slo.outcomes.outcome` (tested on every value of its table).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from collectors import canonical as c
from slo import ClassicHistogram, ErrorRatioIndicator, ErrorSource, LatencyMetric
from slo.outcomes import FINISHED_REASON_OUTCOMES, Outcome, error_ratio_from_increases

#: The histogram family each latency metric is read from; TPOT has none (request records only).
LATENCY_FAMILIES: dict[LatencyMetric, str] = {
    LatencyMetric.TTFT: c.TTFT_SECONDS,
    LatencyMetric.ITL: c.ITL_SECONDS,
    LatencyMetric.E2E: c.E2E_SECONDS,
}
# NOTE: an edge within this relative distance of the threshold is the threshold (0.1 written
# as 1e-1 or reached by arithmetic), so snapping never moves a threshold that is an edge.
_EDGE_RELATIVE_TOLERANCE = 1e-9


class SnappedThreshold(NamedTuple):
    """A latency threshold on a bucket layout: ``requested_seconds`` was asked for,
    ``bound_seconds`` is the bucket edge the SLI measures (``fraction <= bound``)."""

    requested_seconds: float
    bound_seconds: float

    @property
    def is_exact(self) -> bool:
        return math.isclose(
            self.bound_seconds, self.requested_seconds, rel_tol=_EDGE_RELATIVE_TOLERANCE
        )

    @property
    def is_stricter(self) -> bool:
        """The bound is below the threshold: some good requests count as bad (pages early)."""
        return self.bound_seconds < self.requested_seconds and not self.is_exact

    def describe(self) -> str:
        if self.is_exact:
            return f"<= {self.bound_seconds:g} s (a bucket edge)"
        side = "below" if self.is_stricter else "above"
        return (
            f"<= {self.bound_seconds:g} s, the bucket edge {side} the threshold "
            f"{self.requested_seconds:g} s"
        )


def snap_threshold(threshold_seconds: float, upper_bounds: Sequence[float]) -> SnappedThreshold:
    """Snap ``threshold_seconds`` to a finite edge of the layout ``upper_bounds``.

    The largest edge ``<=`` the threshold, so a request slower than the threshold is never
    counted good; when the threshold is below the first edge, the first edge (the closest the
    layout can measure; :attr:`SnappedThreshold.is_stricter` is then False). Raises
    ``ValueError`` for a threshold that is not positive and finite, or a layout without a
    finite positive edge.
    """
    if not (isinstance(threshold_seconds, int | float) and math.isfinite(threshold_seconds)):
        raise ValueError(f"threshold must be a finite number of seconds, got {threshold_seconds!r}")
    if threshold_seconds <= 0:
        raise ValueError(f"threshold must be positive, got {threshold_seconds!r}")
    edges = sorted(b for b in upper_bounds if math.isfinite(b) and b > 0)
    if not edges:
        raise ValueError(f"the layout {tuple(upper_bounds)!r} has no finite positive edge")
    for edge in edges:
        if math.isclose(edge, threshold_seconds, rel_tol=_EDGE_RELATIVE_TOLERANCE):
            return SnappedThreshold(float(threshold_seconds), float(edge))
    below = [edge for edge in edges if edge < threshold_seconds]
    bound = below[-1] if below else edges[0]
    return SnappedThreshold(float(threshold_seconds), float(bound))


@dataclass(frozen=True)
class LatencySLI:
    """Good: an observation of ``metric`` at most ``threshold_seconds``."""

    metric: LatencyMetric
    threshold_seconds: float

    @property
    def family(self) -> str:
        return LATENCY_FAMILIES[self.metric]

    @property
    def families(self) -> tuple[str, ...]:
        return (self.family,)

    def scaled(self, factor: float) -> LatencySLI:
        return self

    def error_ratio(self, window: ClassicHistogram) -> tuple[float, SnappedThreshold]:
        """The fraction of one window's observations above the threshold snapped to the
        window's own layout, ``1 - count(<= bound) / count``, as the exported PromQL computes
        it (``1 - bucket{le=bound} / count``); and the snapped threshold. NaN without
        observations (no traffic never fires). Counts are read as given (cumulative).
        """
        snapped = snap_threshold(self.threshold_seconds, window.upper_bounds)
        total = window.cumulative_counts[-1]
        if not total:
            return math.nan, snapped
        good = window.cumulative_counts[window.upper_bounds.index(snapped.bound_seconds)]
        return 1.0 - good / total, snapped


class CodePatterns(NamedTuple):
    """RE2 patterns over HTTP ``code`` values: ``bad`` are errors; ``valid`` minus
    ``left_out`` are counted (good or bad). ``left_out`` is ``""`` when nothing is."""

    bad: str
    valid: str
    left_out: str


@dataclass(frozen=True)
class ErrorSLI:
    """Good: a request that did not fail (``slo.outcomes`` says which outcomes are errors)."""

    indicator: ErrorRatioIndicator

    @property
    def family(self) -> str:
        if self.indicator.source is ErrorSource.REQUESTS:
            return c.REQUESTS_TOTAL
        return c.HTTP_RESPONSES_TOTAL

    @property
    def families(self) -> tuple[str, ...]:
        return (self.family,)

    @property
    def label(self) -> str:
        """The label whose values say the outcome."""
        if self.indicator.source is ErrorSource.REQUESTS:
            return c.LABEL_FINISHED_REASON
        return c.LABEL_CODE

    def scaled(self, factor: float) -> ErrorSLI:
        return self

    def error_ratio(self, increases: dict[str, float]) -> float:
        """The error ratio of one window's counter increases keyed by ``label`` value
        (``slo.outcomes.error_ratio_from_increases``); NaN without counted requests."""
        return error_ratio_from_increases(increases, self.indicator).error_ratio

    def _counted(self) -> dict[Outcome, bool]:
        return {
            Outcome.GOOD: False,
            Outcome.ERROR: True,
            Outcome.LOAD_SHED: self.indicator.count_load_shedding,
            Outcome.ABORTED: self.indicator.count_aborts,
        }

    def bad_reasons(self) -> tuple[str, ...]:
        """``finished_reason`` values that are errors (source ``requests``)."""
        counted = self._counted()
        return tuple(
            sorted(v for v, o in FINISHED_REASON_OUTCOMES.items() if counted.get(o, False))
        )

    def valid_reasons(self) -> tuple[str, ...]:
        """``finished_reason`` values counted at all, good or bad (source ``requests``)."""
        counted = self._counted()
        return tuple(
            sorted(
                v
                for v, o in FINISHED_REASON_OUTCOMES.items()
                if o is Outcome.GOOD or counted.get(o, False)
            )
        )

    def code_patterns(self) -> CodePatterns:
        """Patterns over HTTP codes (source ``http_responses``); 429 is load shedding, 499 an
        abort, 5xx an error, any other 1xx-4xx good."""
        bad = ["5[0-9][0-9]"]
        left_out = []
        for code, counted in (
            ("429", self.indicator.count_load_shedding),
            ("499", self.indicator.count_aborts),
        ):
            (bad if counted else left_out).append(code)
        return CodePatterns("|".join(bad), "[1-5][0-9][0-9]", "|".join(left_out))


SLI = LatencySLI | ErrorSLI
