"""A latency objective proposed from one window's classic histogram: a threshold and a
target that the window itself would have met with room to spare.

The rule (docs/slo.md, "Proposing SLOs"):

1. **Threshold** — the smallest finite bucket upper bound whose cumulative count reaches the
   ``quantile`` rank (``quantile x total``): the bucket that holds the window's p99, rounded
   up to its upper edge. A classic histogram counts "at or below X" exactly only at an
   edge; between edges the fraction is an interpolation, and the burn-rate rule judges such
   a threshold at the edge below it, stricter than it reads.
2. **Attainment** — the cumulative count at that edge over the total: the fraction of the
   window's observations that met the threshold. It is at least ``quantile`` by step 1.
3. **Attainment's lower bound** — the Wilson score bound at one-sided 95 % confidence
   (``z = 1.645``) on the fraction behind those counts: 108 observations all under the edge
   are as consistent with a true 97.6 % as with 100 %, and a target read off the 100 %
   (0.995) burns as soon as the next minute is a little worse. With many observations the
   bound approaches the attainment.
4. **Target** — the highest of ``targets`` (0.9, 0.95, 0.99, 0.995, 0.999) at or below
   ``lower_bound - margin``. Over the window the error ratio ``1 - attainment`` is then at
   most ``1 - target - margin``, so the SLO would have burned at most
   ``(1 - a) / (1 - a + margin)`` of its budget rate: below 1, not burning.

The comparison in step 4 is exact (rational arithmetic, with ``margin`` and the targets read
as the decimals they print as): ``0.99 + 0.005`` in binary floats is not ``0.995``, and a
bound right at a target must not fall on either side of it by a rounding error.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from slo.buckets import SMALL_DELTA_TOLERANCE, ensure_monotonic
from slo.errors import SLOError
from slo.histogram import ClassicHistogram
from slo.quantile import histogram_quantile

#: The targets a proposal snaps down to: the ones people write, so a proposal reads as a
#: decision ("99 %") rather than as a measurement ("99.37 %").
PROPOSAL_TARGETS = (0.9, 0.95, 0.99, 0.995, 0.999)
DEFAULT_PROPOSAL_QUANTILE = 0.99
#: Half a percent of attainment kept between the window and the target.
DEFAULT_PROPOSAL_MARGIN = 0.005
#: One-sided 95 % normal quantile: the confidence of the attainment's lower bound.
CONFIDENCE_Z = 1.645
#: Below 1 / (1 - 0.99) = 100 observations the p99's rank falls on the slowest observation
#: or two: the "p99" is the window's maximum, not a tail that repeats.
MIN_PROPOSAL_OBSERVATIONS = 100.0


class Shortfall(enum.Enum):
    """Why a window gives no proposal."""

    #: Fewer observations than ``min_observations``: a longer or busier window may do.
    TOO_FEW_OBSERVATIONS = "too few observations"
    #: The quantile's rank is in the ``+Inf`` bucket: no edge bounds it from above.
    BEYOND_LAST_BUCKET = "beyond the last finite bucket"
    #: ``attainment - margin`` is below the lowest target.
    BELOW_LOWEST_TARGET = "below the lowest target"


@dataclass(frozen=True)
class LatencyProposal:
    """A proposed latency objective and what the window showed at it.

    ``threshold_seconds`` is a bucket edge; ``target`` one of the proposal targets;
    ``attainment`` the fraction of the window's ``num_observations`` at or below the
    threshold (exact: counted at the edge), ``attainment_lower_bound`` its Wilson bound
    (one-sided 95 %); ``quantile_seconds`` the window's ``quantile`` as
    ``histogram_quantile`` estimates it (at most ``threshold_seconds``).
    """

    threshold_seconds: float
    target: float
    attainment: float
    attainment_lower_bound: float
    num_observations: float
    quantile: float
    quantile_seconds: float


@dataclass(frozen=True)
class NoProposal:
    """No objective from this window: ``shortfall`` says which rule stopped it and
    ``reason`` says it in a sentence with the numbers."""

    shortfall: Shortfall
    reason: str
    num_observations: float


def propose_latency_objective(
    histogram: ClassicHistogram,
    *,
    quantile: float = DEFAULT_PROPOSAL_QUANTILE,
    margin: float = DEFAULT_PROPOSAL_MARGIN,
    min_observations: float = MIN_PROPOSAL_OBSERVATIONS,
    targets: Sequence[float] = PROPOSAL_TARGETS,
) -> LatencyProposal | NoProposal:
    """Propose a latency objective (threshold in seconds, target fraction) from
    ``histogram``, one window's distribution of a latency in seconds (module docstring).

    ``quantile`` in (0, 1); ``margin`` a fraction of requests in [0, 1); ``min_observations``
    a count >= 1; ``targets`` fractions in (0, 1). Anything else is an :class:`SLOError`.

    Edge cases: fewer than ``min_observations`` observations (none included) →
    :class:`NoProposal` ``TOO_FEW_OBSERVATIONS``; the quantile's rank past the last finite
    bucket (the slowest 1 % are all in ``+Inf``) → ``BEYOND_LAST_BUCKET``, since no
    threshold the buckets can measure would hold; ``attainment - margin`` below every target
    → ``BELOW_LOWEST_TARGET``. Decreasing cumulative counts (scrape races) are raised to the
    running maximum first, as ``histogram_quantile`` does. Edges at or below 0 are never
    proposed (a latency threshold is positive).
    """
    _check_arguments(quantile, margin, min_observations, targets)
    buckets = list(histogram.buckets())
    ensure_monotonic(buckets, SMALL_DELTA_TOLERANCE)
    total = float(buckets[-1].count)
    if total < min_observations:
        return NoProposal(
            Shortfall.TOO_FEW_OBSERVATIONS,
            f"{total:g} observations in the window, fewer than the {min_observations:g} a "
            f"p{_percent(quantile)} needs",
            total,
        )
    estimate = histogram_quantile(quantile, buckets)
    rank = quantile * total
    # NOTE: the same "first bucket whose count reaches the rank" as histogram_quantile, so
    # the edge is the upper bound of the bucket its estimate interpolates in.
    edge = next((b for b in buckets[:-1] if b.upper_bound > 0 and b.count >= rank), None)
    if edge is None:
        finite = [b for b in buckets[:-1] if b.upper_bound > 0]
        last = "there is none"
        if finite:
            last = f"le={finite[-1].upper_bound:g} s, which holds {finite[-1].count / total:.2%}"
        return NoProposal(
            Shortfall.BEYOND_LAST_BUCKET,
            f"the window's p{_percent(quantile)} is beyond the last finite bucket ({last}): "
            "no threshold the buckets can measure would hold; add larger buckets, or find "
            "out why the tail is that slow",
            total,
        )
    attainment = float(edge.count) / total
    lower_bound = wilson_lower_bound(edge.count, total)
    spare = _decimal(margin)
    met = [t for t in targets if _decimal(t) + spare <= Fraction(lower_bound)]
    if not met:
        return NoProposal(
            Shortfall.BELOW_LOWEST_TARGET,
            f"attainment {attainment:.4g} at {edge.upper_bound:g} s (at least {lower_bound:.4g} "
            f"at 95 % confidence) minus margin {margin:g} is below the lowest target "
            f"{min(targets):g}; use a smaller margin",
            total,
        )
    return LatencyProposal(
        threshold_seconds=edge.upper_bound,
        target=max(met),
        attainment=attainment,
        attainment_lower_bound=lower_bound,
        num_observations=total,
        quantile=quantile,
        quantile_seconds=estimate.value,
    )


def wilson_lower_bound(num_good: float, num_total: float, z: float = CONFIDENCE_Z) -> float:
    """The Wilson score lower bound on a success fraction from ``num_good`` of
    ``num_total`` (> 0) observations, at the one-sided confidence of the normal quantile
    ``z``: the ``L < p`` solving ``(p - L)^2 = z^2 L (1 - L) / n`` (``p = good / n``). Unlike
    ``p - z sqrt(p (1 - p) / n)`` it stays inside [0, 1] and is below 1 when every
    observation was good (``n / (n + z^2)``). NaN for no observations."""
    if not num_total > 0:
        return math.nan
    p = num_good / num_total
    z2_over_n = z * z / num_total
    centre = p + z2_over_n / 2
    spread = z * math.sqrt(p * (1 - p) / num_total + z2_over_n / (4 * num_total))
    # NOTE: clamped to [0, p]: at p = 0 the two terms cancel only up to rounding (1e-21).
    return min(p, max(0.0, (centre - spread) / (1 + z2_over_n)))


def _check_arguments(
    quantile: float, margin: float, min_observations: float, targets: Sequence[float]
) -> None:
    if not (_is_number(quantile) and 0 < quantile < 1):
        raise SLOError(f"quantile must be in (0, 1), e.g. 0.99, got {quantile!r}")
    if not (_is_number(margin) and 0 <= margin < 1):
        raise SLOError(
            f"margin must be a fraction in [0, 1), e.g. 0.005 (half a percent), got {margin!r}"
        )
    if not (_is_number(min_observations) and 1 <= min_observations < math.inf):
        raise SLOError(f"min_observations must be a count >= 1, got {min_observations!r}")
    if not targets or not all(_is_number(t) and 0 < t < 1 for t in targets):
        raise SLOError(f"targets must be fractions in (0, 1), got {list(targets)!r}")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)


def _decimal(value: float) -> Fraction:
    """``value`` as the decimal it prints as (``0.005`` is 1/200 exactly, not the binary
    float just above it), so margins and targets compare as the user wrote them."""
    return Fraction(repr(float(value)))


def _percent(quantile: float) -> str:
    return f"{quantile * 100:g}"
