"""What an SLO measures: its indicator (SLI), exactly one of two kinds, as in Sloth and Pyrra.

* :class:`LatencyIndicator` — "requests whose TTFT (or TPOT, ITL, e2e) is at most
  ``threshold_seconds``" are good. From histograms it is the fraction of observations at or
  below the threshold (:func:`slo.objective_attainment`); from request records, the
  ``vllm bench serve --goodput`` comparison for that one metric (:attr:`objectives`).
* :class:`ErrorRatioIndicator` — availability: "requests that did not fail" are good, counted
  from the engines' request counters by finished reason, or from HTTP responses by status
  code (:mod:`slo.outcomes` says which outcomes are errors).

``SLOSpec.indicator`` holds one of them, so a spec cannot be both kinds or neither.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from slo.errors import SLOError
from slo.objectives import Objectives


class LatencyMetric(enum.Enum):
    """The latency a :class:`LatencyIndicator` judges (values are the YAML spelling)."""

    TTFT = "ttft"  # time to first token
    TPOT = "tpot"  # time per output token after the first (request records only)
    ITL = "itl"  # inter-token latency (histograms: per gap; request records: the worst gap)
    E2E = "e2e"  # end-to-end request latency

    @property
    def objective_field(self) -> str:
        """The matching :class:`Objectives` field, e.g. ``ttft_seconds``."""
        return f"{self.value}_seconds"


class ErrorSource(enum.Enum):
    """Which counter an :class:`ErrorRatioIndicator` reads (values are the YAML spelling).

    NOTE: one source, never both: they count the same requests, and adding them would count
    each request twice. Engines differ in what they expose (see docs/slo.md): vLLM, TGI,
    TensorRT-LLM and Dynamo count finished requests by reason; SGLang has no reason, only HTTP
    codes; the bundled engine has both.
    """

    REQUESTS = "requests"  # canonical requests_total, by finished_reason
    HTTP_RESPONSES = "http_responses"  # canonical http_responses_total, by code


@dataclass(frozen=True)
class LatencyIndicator:
    """Good request: ``metric <= threshold_seconds`` (inclusive, as vLLM's goodput)."""

    metric: LatencyMetric
    threshold_seconds: float

    def __post_init__(self) -> None:
        if not isinstance(self.metric, LatencyMetric):
            raise SLOError(f"metric must be a LatencyMetric, got {self.metric!r}")
        threshold = self.threshold_seconds
        if isinstance(threshold, bool) or not isinstance(threshold, int | float):
            raise SLOError(f"threshold_seconds must be a number, got {threshold!r}")
        if not (math.isfinite(threshold) and threshold > 0):
            raise SLOError(f"threshold_seconds must be positive and finite, got {threshold!r}")

    @property
    def objectives(self) -> Objectives:
        """The same objective for request-record goodput (:func:`slo.request_goodput`)."""
        return Objectives(**{self.metric.objective_field: float(self.threshold_seconds)})


@dataclass(frozen=True)
class ErrorRatioIndicator:
    """Good request: one that did not fail. See :mod:`slo.outcomes` for the classification.

    ``count_load_shedding`` (default ``True``): a request refused for overload (HTTP 429, or
    the bundled engine's ``rejected`` outcome) counts as an error. When ``False`` it is left
    out of the ratio altogether (neither good nor bad), for deployments whose 429s are
    per-tenant quota enforcement, i.e. the client's doing.

    ``count_aborts`` (default ``False``): a request aborted before it finished (finished
    reason ``abort`` or HTTP 499, almost always a client that went away) counts as an error. When
    ``False`` it is left out of the ratio: the client cancelled, so the outcome is unknown,
    and a slow server is the latency SLO's business.
    """

    source: ErrorSource
    count_load_shedding: bool = True
    count_aborts: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.source, ErrorSource):
            raise SLOError(f"source must be an ErrorSource, got {self.source!r}")
        for name in ("count_load_shedding", "count_aborts"):
            if not isinstance(getattr(self, name), bool):
                raise SLOError(f"{name} must be true or false, got {getattr(self, name)!r}")


Indicator = LatencyIndicator | ErrorRatioIndicator
