"""Goodput and SLO attainment.

From request records, exactly as ``vllm bench serve --goodput`` defines it: a request is good
when it succeeded and, for every objective given, ``threshold >= measured`` (inclusive);
``TPOT = (e2e - TTFT) / (output_tokens - 1)``, and 0 for one-token outputs
(:func:`slo.tpot_seconds`); goodput is good requests per second of benchmark wall time.

From histograms only, per objective: the fraction of observations at or below the threshold,
exact when the threshold is a bucket bound and otherwise interpolated (and flagged), with the
bucket's bounds. Histograms lose which observations belong to the same request, so the joint
attainment ("met every objective") is only bounded: ``max(0, sum(a) - (n - 1)) <= joint <=
min(a)`` (the Fréchet bounds).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from slo.errors import SLOError
from slo.histogram import ClassicHistogram
from slo.objectives import Objectives
from slo.quantile import histogram_fraction
from slo.tpot import tpot_seconds


@dataclass(frozen=True)
class RequestRecord:
    """One finished request as a client (or the engine's trace) saw it; times in seconds.

    ``max_itl_seconds`` is the longest gap between streamed tokens; it is needed only for an
    ``itl_seconds`` objective, which ``vllm bench serve`` does not have (see
    :func:`measured_seconds`). ``tenant``, ``model`` and ``route`` select the SLO that applies
    (``SLOSpec.selector.matches``) and feed showback.
    """

    succeeded: bool
    ttft_seconds: float
    e2e_seconds: float
    output_tokens: int
    prompt_tokens: int = 0
    max_itl_seconds: float | None = None
    tenant: str = ""
    model: str = ""
    route: str = ""

    @property
    def tpot_seconds(self) -> float:
        """``(e2e - ttft) / (output_tokens - 1)``; 0 when at most one token was generated."""
        return tpot_seconds(self.e2e_seconds, self.ttft_seconds, self.output_tokens)


class GoodputResult(NamedTuple):
    """Counts and rates over one benchmark run or window."""

    num_requests: int
    num_succeeded: int
    num_good: int
    duration_seconds: float

    @property
    def attainment(self) -> float:
        """Good requests over all requests (failures count as not good); NaN with none."""
        return self.num_good / self.num_requests if self.num_requests else math.nan

    @property
    def goodput_requests_per_second(self) -> float:
        """vLLM's ``request_goodput``: good requests per second of wall time."""
        return self.num_good / self.duration_seconds

    @property
    def throughput_requests_per_second(self) -> float:
        """vLLM's ``request_throughput``: completed (succeeded) requests per second."""
        return self.num_succeeded / self.duration_seconds


def measured_seconds(record: RequestRecord, objective: str) -> float:
    """The value of ``record`` an objective is compared with.

    ``itl_seconds`` is a Tailwatch extension: vLLM's goodput has no ITL key, and Tailwatch
    judges a request against an ITL objective by its worst gap (``max_itl_seconds``), 0 for
    one-token outputs like TPOT. Raises :class:`SLOError` when that gap was not recorded.
    """
    if objective == "ttft_seconds":
        return record.ttft_seconds
    if objective == "tpot_seconds":
        return record.tpot_seconds
    if objective == "e2e_seconds":
        return record.e2e_seconds
    if objective == "itl_seconds":
        if record.max_itl_seconds is not None:
            return record.max_itl_seconds
        if record.output_tokens <= 1:
            return 0.0
        raise SLOError(
            "an itl_seconds objective needs max_itl_seconds on every multi-token request; "
            "record the worst inter-token gap or drop the ITL objective"
        )
    raise SLOError(f"unknown objective {objective!r}")


def is_good(record: RequestRecord, objectives: Objectives) -> bool:
    """Succeeded, and ``threshold >= measured`` for every objective given."""
    return record.succeeded and all(
        threshold >= measured_seconds(record, name) for name, threshold in objectives.given()
    )


def request_goodput(
    records: Iterable[RequestRecord], objectives: Objectives, duration_seconds: float
) -> GoodputResult:
    """Goodput over ``records`` that ran for ``duration_seconds`` of wall time (> 0)."""
    if not (math.isfinite(duration_seconds) and duration_seconds > 0):
        raise SLOError(f"duration_seconds must be positive, got {duration_seconds}")
    num_requests = num_succeeded = num_good = 0
    for record in records:
        num_requests += 1
        num_succeeded += record.succeeded
        num_good += is_good(record, objectives)
    return GoodputResult(num_requests, num_succeeded, num_good, duration_seconds)


class AttainmentEstimate(NamedTuple):
    """Fraction of observations at or below a threshold, from a histogram.

    ``is_exact`` when the threshold is a bucket bound (then all three figures are equal);
    otherwise ``attainment`` is interpolated inside the bucket holding the threshold and the
    true fraction lies in ``[lower_bound, upper_bound]``. NaN with no observations.
    """

    attainment: float
    lower_bound: float
    upper_bound: float
    is_exact: bool


def objective_attainment(
    histogram: ClassicHistogram, threshold_seconds: float
) -> AttainmentEstimate:
    """Per-objective attainment from one (window's) histogram.

    The estimate is Prometheus's ``histogram_fraction(-Inf, threshold)``: linear inside a
    bucket, and nothing credited from the ``+Inf`` bucket (so a threshold above the highest
    finite bound gives the lower bound).
    """
    buckets = histogram.buckets()
    total = histogram.total_count
    estimate = histogram_fraction(-math.inf, threshold_seconds, buckets)
    if total == 0 or math.isnan(threshold_seconds):
        return AttainmentEstimate(math.nan, math.nan, math.nan, False)
    bounds = histogram.upper_bounds
    if threshold_seconds in bounds:
        return AttainmentEstimate(estimate, estimate, estimate, True)
    position = next(i for i, bound in enumerate(bounds) if bound > threshold_seconds)
    # The envelope repair keeps the bounds consistent with the estimate on non-monotonic input.
    below = max(histogram.cumulative_counts[:position], default=0.0)
    at_or_above = max(histogram.cumulative_counts[: position + 1])
    return AttainmentEstimate(estimate, below / total, min(at_or_above, total) / total, False)


class JointAttainmentBounds(NamedTuple):
    """What per-objective attainments say about "met every objective"."""

    lower_bound: float
    upper_bound: float


def joint_attainment_bounds(
    attainments: Sequence[AttainmentEstimate | float],
) -> JointAttainmentBounds:
    """``max(0, sum(a_i) - (n - 1)) <= joint <= min(a_i)``, using each estimate's lower
    bound for the lower side and its upper bound for the upper side. With no objectives every
    request attains: ``(1, 1)``."""
    lows = [a.lower_bound if isinstance(a, AttainmentEstimate) else a for a in attainments]
    highs = [a.upper_bound if isinstance(a, AttainmentEstimate) else a for a in attainments]
    for value in (*lows, *highs):
        if not 0 <= value <= 1:
            raise SLOError(f"attainments must lie in [0, 1], got {value}")
    if not lows:
        return JointAttainmentBounds(1.0, 1.0)
    return JointAttainmentBounds(max(0.0, sum(lows) - (len(lows) - 1)), min(highs))
